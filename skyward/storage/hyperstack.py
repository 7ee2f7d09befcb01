"""Hyperstack object storage: S3 keys minted through Hyperstack's API from an API key.

``POST {api}/object-storage/access-keys`` with ``{"region": ...}`` and the ``api_key``
header answers ``{"id", "access_key", "secret_key", ...}``; ``DELETE
{api}/object-storage/access-keys/{id}`` revokes it. A key is minted when a storage
using it opens and revoked when the last holder gives it back, so none is left standing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from skyward.storage.errors import EndpointUnreachableError, StorageCredentialsError, StorageError

API_URL = "https://infrahub-api.nexgencloud.com/v1"
ACCESS_KEYS_PATH = "/object-storage/access-keys"
#: S3 endpoint of each object-storage region. Hyperstack documents only CANADA-1's
#: (``https://ca1.obj.nexgencloud.io``); other regions need ``endpoint=`` given.
S3_ENDPOINTS = {"CANADA-1": "https://ca1.obj.nexgencloud.io"}
DEFAULT_REGION = "CANADA-1"
API_KEY_ENV = "HYPERSTACK_API_KEY"
"""Where the API key is read from when none is given."""
REQUEST_TIMEOUT_S = 30.0

_log = logging.getLogger(__name__)


class HyperstackAccessKey:
    """One object-storage key pair, minted on the first ``acquire()`` and revoked when
    every ``acquire()`` has had its ``release()``. Thread-safe; pickles without the key."""

    def __init__(
        self, api_key: str, region: str, *, api_url: str = API_URL,
        timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._api_key = api_key
        self._region = region
        self._api_url = api_url.rstrip("/")
        self._timeout = timeout
        self._lock = threading.Lock()
        self._holders = 0
        self._minted: tuple[str, str, str] | None = None  # (id, access key, secret key)

    def __reduce__(
        self,
    ) -> tuple[Callable[[str, str, str, float], HyperstackAccessKey], tuple[str, str, str, float]]:
        return (
            _rebuild,
            (self._api_key, self._region, self._api_url, self._timeout),
        )

    def acquire(self) -> tuple[str, str]:
        """The (access key, secret key) pair, minted if none is held. Raises
        StorageCredentialsError (refused api_key, bad answer) or EndpointUnreachableError."""
        with self._lock:
            if self._minted is None:
                self._minted = self._mint()
            self._holders += 1
            return self._minted[1], self._minted[2]

    def release(self) -> None:
        """Give back one ``acquire()``; the last one revokes the key (failures logged)."""
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders or self._minted is None:
                return
            key_id, self._minted = self._minted[0], None
        try:
            self._request("DELETE", f"{ACCESS_KEYS_PATH}/{key_id}")
        except (StorageError, ValueError) as error:
            _log.warning("could not revoke Hyperstack access key %s: %s", key_id, error)

    def _mint(self) -> tuple[str, str, str]:
        answer = self._request("POST", ACCESS_KEYS_PATH, {"region": self._region})
        fields = [answer.get(name) if isinstance(answer, dict) else None
                  for name in ("id", "access_key", "secret_key")]
        if not all(fields[1:]) or fields[0] is None:
            raise StorageCredentialsError(
                "Hyperstack's answer to creating an object-storage key had no id, "
                "access_key and secret_key fields",
                self._api_url,
            )
        return str(fields[0]), str(fields[1]), str(fields[2])

    def _request(self, method: str, path: str, body: dict[str, str] | None = None) -> object:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            self._api_url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "api_key": self._api_key,
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                raise StorageCredentialsError(
                    f"Hyperstack refused the API key (HTTP {error.code}) at {self._api_url}: "
                    "check Hyperstack(api_key=...)",
                    self._api_url,
                ) from None
            detail = error.read()[:300].decode(errors="replace")
            raise StorageCredentialsError(
                f"Hyperstack could not {method} {path} in region {self._region} "
                f"(HTTP {error.code}): {detail}",
                self._api_url,
            ) from None
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise EndpointUnreachableError(self._api_url, str(reason)) from None
        return json.loads(raw) if raw.strip() else {}


class HyperstackKeyPart:
    """One half (access or secret) of a HyperstackAccessKey, as a Storage credential:
    calling it takes a lease on the key, ``release()`` gives it back."""

    def __init__(self, key: HyperstackAccessKey, part: int) -> None:
        self._key = key
        self._part = part

    def __call__(self) -> str:
        return self._key.acquire()[self._part]

    def release(self) -> None:
        self._key.release()


def _rebuild(api_key: str, region: str, api_url: str, timeout: float) -> HyperstackAccessKey:
    return HyperstackAccessKey(api_key, region, api_url=api_url, timeout=timeout)
