"""Credentials of a Storage: a string, or a callable that returns one (or an awaitable of
one), resolved when the storage is opened. Values are never put in messages or reprs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeAlias, TypeVar, runtime_checkable

from skyward.storage.errors import StorageCredentialsError

Credential: TypeAlias = str | Callable[[], str | Awaitable[str]]

T = TypeVar("T")

#: How long one credential callable may take (an API call minting a key, a vault read).
RESOLVE_TIMEOUT_S = 60.0


@runtime_checkable
class LeasedCredential(Protocol):
    """A credential created on demand that must be handed back (a key minted through a
    provider's API): every call takes a lease, every ``release()`` gives one back."""

    def __call__(self) -> str: ...

    def release(self) -> None: ...


def check_credential(owner: str, field: str, value: object) -> None:
    """Raise ValueError unless ``value`` is None, a non-empty str or a callable.

    The message names the field and the value's type, never the value."""
    if value is None or callable(value):
        return
    if isinstance(value, str):
        if value:
            return
        raise ValueError(f"{owner}.{field} is an empty string: pass the key, or None")
    raise ValueError(
        f"{owner}.{field} of type {type(value).__name__} is not valid: pass a str, or a "
        "callable returning a str or an awaitable of a str (e.g. lambda: os.environ['KEY'])"
    )


def resolve_credential(field: str, value: Credential | None, endpoint: str) -> str | None:
    """The string behind ``value``: itself, or what its callable returns (awaited if it is
    awaitable, on a private loop when this thread already runs one).

    Raises StorageCredentialsError if the callable fails, times out or returns no string."""
    if value is None or isinstance(value, str):
        return value
    try:
        result: object = value()
        if inspect.isawaitable(result):
            result = _run(result)
    except StorageCredentialsError:
        raise
    except TimeoutError:
        raise StorageCredentialsError(
            f"the {field} callable for {endpoint} did not return within "
            f"{RESOLVE_TIMEOUT_S:.0f} s",
            endpoint,
        ) from None
    except Exception as error:
        raise StorageCredentialsError(
            f"the {field} callable for {endpoint} failed: {type(error).__name__}: {error}",
            endpoint,
        ) from error
    if not isinstance(result, str) or not result:
        raise StorageCredentialsError(
            f"the {field} callable for {endpoint} returned {type(result).__name__}, not a "
            "non-empty str",
            endpoint,
        )
    return result


def resolve_pair(
    access_key: Credential | None, secret_key: Credential | None, endpoint: str
) -> tuple[str | None, str | None]:
    """Both keys resolved; a lease taken for one is handed back if the other fails."""
    access = resolve_credential("access_key", access_key, endpoint)
    try:
        return access, resolve_credential("secret_key", secret_key, endpoint)
    except BaseException:
        release_credential(access_key)
        raise


def release_credential(value: Credential | None) -> None:
    """Hand back the lease a resolved ``value`` took, if it is a LeasedCredential."""
    if isinstance(value, LeasedCredential):
        value.release()


def _run(awaitable: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(_wrap(awaitable), RESOLVE_TIMEOUT_S)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with concurrent.futures.ThreadPoolExecutor(1, "skyward-credential") as pool:
        return pool.submit(asyncio.run, bounded()).result(timeout=RESOLVE_TIMEOUT_S + 5)


async def _wrap(awaitable: Awaitable[T]) -> T:
    return await awaitable
