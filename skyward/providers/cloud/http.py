"""One HTTP client for every cloud API (httpx): a connect and a read timeout on every
call, bounded retries with backoff for what may pass (connection failures, 429 and 5xx;
a request that creates something is retried only when it never reached the server),
and errors that name the cloud, the call, the status and the API's own message.

Credentials travel in headers only, are never logged and never appear in an error.
``base_url`` is the cloud's documented address unless ``SKYWARD_<CLOUD>_API_URL`` says
otherwise (a proxy, or a local fake in the tests): https, or http to this machine only.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

import httpx

from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CloudError, CredentialsError
from skyward.providers.cloud.fields import Scalar
from skyward.providers.cloud.urls import check_api_url

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
MAX_ATTEMPTS = 4
BACKOFF = 0.5
MAX_BACKOFF = 8.0
RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD", "DELETE"})
"""Methods retried after the server may have seen them (DELETE is idempotent here)."""

Params = Mapping[str, Scalar]
"""A call's query parameters."""


@dataclass(frozen=True, slots=True)
class FailedCall:
    """One API call that ended in an error: ``status`` None when the API was not reached."""

    cloud: str
    method: str
    path: str
    status: int | None
    error: str


_watchers: list[Callable[[FailedCall], None]] = []
_watchers_lock = threading.Lock()


@contextlib.contextmanager
def failed_calls() -> Iterator[list[FailedCall]]:
    """Inside the block, every cloud API call of this process that fails (after its
    retries) is appended to the list yielded (``sky providers check --launch``)."""
    found: list[FailedCall] = []
    with _watchers_lock:
        _watchers.append(found.append)
    try:
        yield found
    finally:
        with _watchers_lock:
            _watchers.remove(found.append)


def _failed(call: FailedCall) -> None:
    with _watchers_lock:
        watchers = list(_watchers)
    for watcher in watchers:
        watcher(call)


def base_url(cloud_key: str, default: str) -> str:
    """``SKYWARD_<CLOUD>_API_URL`` if set, else ``default``. ValueError for an override that
    would send the credentials in the clear (see ``check_api_url``)."""
    variable = f"SKYWARD_{cloud_key.upper()}_API_URL"
    url = os.environ.get(variable)
    return check_api_url(variable, url, "the cloud's API credentials") if url else default


class ApiClient:
    """Calls one cloud's API. ``auth()`` returns the headers that authenticate a call (it
    is asked on every call, so a token can be refreshed); ``credentials_hint`` says where
    the credentials come from, for the error when they are refused; ``transport`` how
    requests travel (None: TCP; a Unix socket for a local engine's API)."""

    def __init__(
        self, cloud: str, url: str, auth: Callable[[], Mapping[str, str]], credentials_hint: str,
        *, attempts: int = MAX_ATTEMPTS, transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.cloud = cloud
        self._auth = auth
        self._hint = credentials_hint
        self._attempts = attempts
        self._http = httpx.Client(
            base_url=url.rstrip("/"), timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
            headers={"User-Agent": "skyward", "Accept": "application/json"}, transport=transport,
        )

    def call(
        self, method: str, path: str, what: str, *, json: object = None, params: Params | None = None,
        form: Mapping[str, str] | None = None, text: str | None = None,
    ) -> object:
        """The parsed JSON answer (None for an empty body, the text for a body that is not
        JSON; read it with ``cloud.fields``). CredentialsError for 401/403, CloudAPIError for
        another error status, CloudError when the API cannot be reached after the
        retries. ``what`` says what the call does, for the messages; ``json`` a body of
        JSON values; ``text`` a plain-text body (``text/plain``) instead of JSON or a form."""
        method = method.upper()
        plain = {"Content-Type": "text/plain"} if text is not None else {}
        attempt = 0
        while True:
            attempt += 1
            headers = {**self._auth(), **plain}
            try:
                response = self._http.request(
                    method, path, json=json, params=params, data=form, headers=headers,
                    content=text.encode() if text is not None else None,
                )
            except httpx.TransportError as exc:
                sent = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if attempt >= self._attempts or (sent and method not in SAFE_METHODS):
                    _failed(FailedCall(self.cloud, method, path, None, f"{type(exc).__name__}: {exc}"))
                    raise CloudError(
                        f"could not reach the {self.cloud} API ({self._http.base_url}) while {what}: "
                        f"{type(exc).__name__}: {exc}; check the network, or try again"
                    ) from None
                self._sleep(attempt, None)
                continue
            if response.status_code in RETRIED_STATUS and attempt < self._attempts and (
                method in SAFE_METHODS or response.status_code == 429
            ):
                self._sleep(attempt, response.headers.get("Retry-After"))
                continue
            try:
                return self._answer(response, what)
            except CloudError as exc:
                _failed(FailedCall(self.cloud, method, path, response.status_code, str(exc)))
                raise

    def read(self, path: str, what: str) -> object:
        """``GET path``: the parsed answer, or None when the API answers 404 (gone). Errors
        as ``call``."""
        try:
            return self.call("GET", path, what)
        except CloudAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def remove(
        self, path: str, what: str, *, method: str = "DELETE", json: object = None, params: Params | None = None
    ) -> None:
        """``call`` for a request that removes something (``DELETE path`` unless ``method``
        says otherwise): 404 (gone already) is fine. Other errors as ``call``."""
        try:
            self.call(method, path, what, json=json, params=params)
        except CloudAPIError as exc:
            if exc.status != 404:
                raise

    @contextlib.contextmanager
    def removed_on_error(self, path: str, what: str) -> Iterator[None]:
        """Inside the block, any exception (an interrupt too) first removes what was just
        made at ``path`` (``remove``: 404 is fine), then passes on; an error of that
        removal is raised instead, chained to the first."""
        try:
            yield
        except BaseException:
            self.remove(path, what)
            raise

    def close(self) -> None:
        self._http.close()

    def _answer(self, response: httpx.Response, what: str) -> object:
        body = _parse(response)
        status = response.status_code
        if status in (401, 403):
            raise CredentialsError(
                f"the {self.cloud} API refused the credentials while {what} (HTTP {status}: {message(body)}); "
                f"check {self._hint}"
            )
        if status >= 400:
            raise CloudAPIError(
                f"the {self.cloud} API answered HTTP {status} while {what}: {message(body)}", status, body
            )
        return body

    @staticmethod
    def _sleep(attempt: int, retry_after: str | None) -> None:
        delay = min(MAX_BACKOFF, BACKOFF * 2 ** (attempt - 1))
        if retry_after is not None:
            try:
                delay = min(MAX_BACKOFF, max(0.0, float(retry_after)))
            except ValueError:
                pass
        time.sleep(delay)


def bearer_client(cloud: str, cloud_key: str, url: str, token: str, credentials_hint: str) -> ApiClient:
    """An ``ApiClient`` for ``base_url(cloud_key, url)`` whose calls carry ``token`` as
    ``Authorization: Bearer``."""
    return ApiClient(cloud, base_url(cloud_key, url), lambda: {"Authorization": f"Bearer {token}"}, credentials_hint)


@contextlib.contextmanager
def capacity_errors(phrases: Collection[str], shortage: str, statuses: Collection[int] | None = None) -> Iterator[None]:
    """Inside the block, a CloudAPIError whose message holds one of ``phrases`` (in lower
    case; with ``statuses``, only of those statuses) is raised as CapacityError
    ``"{shortage}: {the API's message}"``; any other error passes as it is."""
    try:
        yield
    except CloudAPIError as exc:
        said = message(exc.body)
        if (statuses is None or exc.status in statuses) and any(phrase in said.lower() for phrase in phrases):
            raise CapacityError(f"{shortage}: {said}") from None
        raise


def message(body: object) -> str:
    """The error message an API put in its answer (its usual keys), else the body cut short."""
    if isinstance(body, dict):
        for key in ("message", "error_description", "error", "msg", "detail", "errors", "code"):
            value = body.get(key)
            if isinstance(value, dict):
                return message(value)
            if isinstance(value, list) and value:
                return "; ".join(message(item) if isinstance(item, dict) else str(item) for item in value)
            if value:
                return str(value)
    text = str(body) if body is not None else "no message"
    return text[:300]


def _parse(response: httpx.Response) -> object:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text
