"""Google credentials the way gcloud and Google's libraries find them, turned into bearer
tokens by Google's auth library (``google-auth``): a service-account or authorized-user
JSON file named by ``$GOOGLE_APPLICATION_CREDENTIALS``, else gcloud's application-default
credentials (``$CLOUDSDK_CONFIG`` or ``~/.config/gcloud``, then
``application_default_credentials.json``). The metadata server of a Compute Engine VM is
never asked. Tokens are fetched with this package's HTTP client (httpx) and refreshed
before they expire; their values are never logged or shown."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from skyward.providers.cloud.errors import CloudError, CredentialsError
from skyward.providers.cloud.urls import check_api_url

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_TIMEOUT = 30.0
FILE_VARIABLE = "GOOGLE_APPLICATION_CREDENTIALS"
PROJECT_VARIABLES = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")
TYPES = ("service_account", "authorized_user")


def adc_path() -> Path:
    """gcloud's application-default credentials file (``gcloud auth application-default login``)."""
    folder = os.environ.get("CLOUDSDK_CONFIG") or "~/.config/gcloud"
    return Path(folder).expanduser() / "application_default_credentials.json"


def credentials_path() -> Path | None:
    """``$GOOGLE_APPLICATION_CREDENTIALS``, else the application-default file when it exists."""
    named = os.environ.get(FILE_VARIABLE, "").strip()
    if named:
        return Path(named).expanduser()
    default = adc_path()
    return default if default.is_file() else None


def where() -> str:
    return f"${FILE_VARIABLE} (a service-account JSON key) or {adc_path()} (gcloud auth application-default login)"


class _Response:
    """An httpx answer as google-auth's transport reads it."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers = dict(response.headers)
        self.data = response.content


class _Request:
    """google-auth's transport (``google.auth.transport.Request``) on httpx, for the token
    endpoint only; refuses a token endpoint that would carry the credentials in the clear."""

    def __init__(self, source: Path) -> None:
        self._source = source

    def __call__(
        self, url: str, method: str = "GET", body: bytes | None = None, headers: Mapping[str, str] | None = None,
        timeout: float | None = None, **kwargs: object,
    ) -> _Response:
        from google.auth import exceptions

        try:
            check_api_url(f"token_uri in {self._source}", url, "the signed token request")
        except ValueError as exc:
            raise exceptions.TransportError(str(exc)) from None
        try:
            answer = httpx.request(method, url, content=body, headers=dict(headers or {}), timeout=timeout or TOKEN_TIMEOUT)
        except httpx.HTTPError as exc:
            raise exceptions.TransportError(f"{type(exc).__name__}: {exc}") from None
        return _Response(answer)


@dataclass(frozen=True, slots=True)
class Identity:
    """What was found: the file and the project it names (None: it names none)."""

    path: Path
    kind: str
    project: str | None


class GoogleToken:
    """Bearer tokens from the credentials file at ``path`` (None: ``credentials_path()``).
    CredentialsError naming where it looked when there is no such file, or naming the file
    when it is not a Google credentials file of a kind used here."""

    def __init__(self, path: Path | None = None) -> None:
        from google.auth import exceptions
        from google.auth.credentials import Credentials
        from google.oauth2 import credentials, service_account

        found = path or credentials_path()
        if found is None:
            raise CredentialsError(f"GCP credentials were not found: set {where()}")
        try:
            info = json.loads(found.read_text())
        except OSError as exc:
            raise CredentialsError(f"GCP credentials file {found} cannot be read ({exc.strerror}); check {where()}") from None
        except ValueError:
            raise CredentialsError(f"GCP credentials file {found} is not JSON; give a service-account key or ADC file") from None
        kind = str(info.get("type") or "") if isinstance(info, dict) else ""
        if kind not in TYPES:
            raise CredentialsError(
                f"GCP credentials file {found} has type {kind or 'none'!r}; skyward reads {' and '.join(TYPES)} "
                "files (a service-account JSON key, or gcloud auth application-default login)"
            )
        self._credentials: Credentials
        try:  # the loader of the file's own type: a generic loader would follow any URL a file names
            if kind == "service_account":
                self._credentials = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
                project = info.get("project_id")
            else:
                self._credentials = credentials.Credentials.from_authorized_user_info(info, scopes=[SCOPE])
                project = info.get("quota_project_id")
        except (exceptions.DefaultCredentialsError, ValueError) as exc:
            raise CredentialsError(f"GCP credentials file {found} is not valid: {exc}") from None
        self.identity = Identity(found, kind, str(project) if project else None)
        self._request = _Request(found)
        self._lock = threading.Lock()

    def headers(self) -> dict[str, str]:
        """``Authorization: Bearer`` with a token valid now (fetched or refreshed when
        needed). CredentialsError when Google refuses the credentials; CloudError when its
        token endpoint cannot be reached."""
        from google.auth import exceptions

        with self._lock:
            if not self._credentials.valid:
                try:
                    self._credentials.refresh(self._request)
                except exceptions.RefreshError as exc:
                    raise CredentialsError(
                        f"Google refused the credentials of {self.identity.path} ({_first(exc)}); check {where()}"
                    ) from None
                except exceptions.TransportError as exc:
                    raise CloudError(
                        f"could not get a GCP access token for {self.identity.path}: {exc}; check the network"
                    ) from None
            return {"Authorization": f"Bearer {self._credentials.token}"}


_tokens: dict[tuple[Path, int], GoogleToken] = {}
_tokens_lock = threading.Lock()


def token_for(path: Path | None) -> GoogleToken:
    """The ``GoogleToken`` of the credentials file at ``path`` (None: ``credentials_path()``),
    shared by every provider of this process that uses the same file (until it changes), so
    a token is fetched once and refreshed as it nears its expiry. Errors as ``GoogleToken``."""
    found = path or credentials_path()
    if found is None:
        raise CredentialsError(f"GCP credentials were not found: set {where()}")
    try:
        key = (found.resolve(), found.stat().st_mtime_ns)
    except OSError as exc:
        raise CredentialsError(f"GCP credentials file {found} cannot be read ({exc.strerror}); check {where()}") from None
    with _tokens_lock:
        if key not in _tokens:
            _tokens[key] = GoogleToken(found)
        return _tokens[key]


def project_of(given: str | None, identity: Identity) -> str:
    """``given``, else ``$GOOGLE_CLOUD_PROJECT`` (or ``$CLOUDSDK_CORE_PROJECT``), else the
    credentials file's project; CredentialsError naming all three when none is set."""
    if given:
        return given
    for variable in PROJECT_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    if identity.project:
        return identity.project
    raise CredentialsError(
        f"no GCP project was given: pass GCP(project=...), set ${PROJECT_VARIABLES[0]}, or use credentials whose "
        f"file names one (project_id of a service-account key; {identity.path} names none)"
    )


def _first(exc: Exception) -> str:
    """A refresh error's message without the token endpoint's whole answer."""
    text = str(exc.args[0]) if exc.args else str(exc)
    return text[:300]
