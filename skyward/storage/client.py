"""``sky.Storage``: a small S3-compatible object-store client, used as a context manager."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Literal, Protocol, Self, TypedDict, TypeVar

from skyward.core.validation import fail
from skyward.storage.credentials import (
    Credential,
    LeasedCredential,
    check_credential,
    release_credential,
    resolve_pair,
)
from skyward.storage.endpoint import check_endpoint, is_aws_s3, signing_region
from skyward.storage.errors import ObjectNotFoundError
from skyward.storage.progress import Direction, TransferTracker, current_progress

if TYPE_CHECKING:
    from skyward.storage import s3

T = TypeVar("T")


class ObjectHead(TypedDict, total=False):
    """The part of ``head_object``'s answer a Storage reads (empty: no such object)."""

    ContentLength: int


class _ListedObject(TypedDict):
    Key: str


class _ListPage(TypedDict, total=False):
    Contents: list[_ListedObject]


class _ListPaginator(Protocol):
    def paginate(self, *, Bucket: str, Prefix: str) -> Iterator[_ListPage]: ...


class S3Client(Protocol):
    """The methods of a boto3 S3 client that a Storage calls (boto3 has no types)."""

    def head_object(self, *, Bucket: str, Key: str) -> ObjectHead: ...

    def head_bucket(self, *, Bucket: str) -> object: ...

    def delete_object(self, *, Bucket: str, Key: str) -> object: ...

    def upload_file(
        self, Filename: str, Bucket: str, Key: str, *, Config: object,
        Callback: Callable[[int], None] | None,
    ) -> None: ...

    def download_fileobj(
        self, Bucket: str, Key: str, Fileobj: IO[bytes], *, Config: object,
        Callback: Callable[[int], None] | None,
    ) -> None: ...

    def get_paginator(self, operation_name: Literal["list_objects_v2"]) -> _ListPaginator: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ResolvedStorage:
    """A storage whose credentials are resolved to strings (None: the AWS credential
    chain): what a node needs to mount a bucket. Picklable; the repr hides the keys.
    ``session_token`` goes with temporary keys (an AWS role or SSO session)."""

    endpoint: str
    region: str
    access_key: str | None = field(repr=False)
    secret_key: str | None = field(repr=False)
    path_style: bool
    session_token: str | None = field(default=None, repr=False)


class _SharedClient:
    """The mutable part of an open Storage: its boto3 client, shared by nested and
    concurrent ``with`` blocks, closed when the last one ends. Pickles as a closed one."""

    __slots__ = ("client", "depth", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.client: S3Client | None = None

    def __reduce__(self) -> tuple[type[_SharedClient], tuple[()]]:
        return (_SharedClient, ())


@dataclass(frozen=True, slots=True)
class Storage:
    """An S3-compatible endpoint and the credentials for it.

    Credentials are strings, or callables returning a string or an awaitable of one,
    resolved when the storage is opened; both None means boto3's credential chain.
    ``path_style`` addresses buckets as ``endpoint/bucket/key`` instead of
    ``bucket.endpoint/key``. ``ship_client_credentials`` (AWS's S3 only, without keys)
    lets a remote pool give its nodes this machine's AWS credential chain for a Volume
    of this storage; without it such a Volume is refused there. The methods work inside
    ``with storage:``; they raise StorageError subclasses (missing bucket, missing
    object, refused credentials, unreachable endpoint) that name the endpoint, bucket
    and key, never a secret.
    """

    endpoint: str
    access_key: Credential | None = field(default=None, repr=False)
    secret_key: Credential | None = field(default=None, repr=False)
    path_style: bool = False
    ship_client_credentials: bool = False
    _session: _SharedClient = field(
        default_factory=_SharedClient, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        check_endpoint("Storage", "endpoint", self.endpoint)
        check_credential("Storage", "access_key", self.access_key)
        check_credential("Storage", "secret_key", self.secret_key)
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError(
                "Storage.access_key and Storage.secret_key go together: pass both, or "
                "neither to use the AWS credential chain"
            )
        if not isinstance(self.path_style, bool):
            raise fail("Storage", "path_style", self.path_style, "it must be True or False")
        _check_ship_client_credentials(self)

    @property
    def region(self) -> str:
        """The region requests are signed for, read from the endpoint's host."""
        return signing_region(self.endpoint)

    def resolve(self) -> Storage:
        """This storage with its credentials called now and kept as strings (each
        callable or awaitable asked once): a client that no longer calls out, e.g. to
        hand to code that pickles it. Storage of the AWS credential chain is returned as
        it is. ValueError naming the field for a leased credential (a key minted for
        the block that uses it: ``with storage.credentials()`` hands it back);
        StorageCredentialsError when a credential fails."""
        for name in ("access_key", "secret_key"):
            if isinstance(getattr(self, name), LeasedCredential):
                raise ValueError(
                    f"Storage.{name} is a leased credential (minted on demand and handed back after use); resolve() "
                    "would keep its lease: use `with storage.credentials() as resolved:` instead"
                )
        if self.access_key is None:
            return self
        access_key, secret_key = resolve_pair(self.access_key, self.secret_key, self.endpoint)
        return replace(self, access_key=access_key, secret_key=secret_key)

    @contextmanager
    def credentials(self) -> Iterator[ResolvedStorage]:
        """Resolve the credentials for the length of the block (a key minted through an
        API is handed back at its end). Raises StorageCredentialsError."""
        access_key, secret_key = resolve_pair(self.access_key, self.secret_key, self.endpoint)
        try:
            yield ResolvedStorage(
                self.endpoint, self.region, access_key, secret_key, self.path_style
            )
        finally:
            self._release()

    def __enter__(self) -> Self:
        with self._session.lock:
            if self._session.depth == 0:
                self._session.client = self._open()
            self._session.depth += 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._session.lock:
            self._session.depth -= 1
            if self._session.depth == 0:
                client, self._session.client = self._session.client, None
                if client is not None:
                    client.close()
                self._release()

    def upload(
        self, bucket: str, local_path: str | os.PathLike[str], *, key: str | None = None
    ) -> str:
        """Upload the file at ``local_path`` as ``key`` (default: the file's base name);
        large files go in parallel parts. Returns the key."""
        client = self._client("upload")
        _check_name("upload", "bucket", bucket)
        path = os.fspath(local_path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Storage.upload: {path!r} is not a file")
        key = os.path.basename(path) if key is None else key
        _check_name("upload", "key", key)
        from skyward.storage import s3

        target = s3.Target(self.endpoint, bucket, key)
        with self._tracking("upload", bucket, key, os.path.getsize(path)) as tracker:
            self._run(
                target,
                lambda: client.upload_file(
                    path, bucket, key, Config=s3.TRANSFER, Callback=tracker
                ),
            )
        return key

    def download(self, bucket: str, key: str, local_path: str | os.PathLike[str]) -> Path:
        """Download ``key`` to ``local_path``, creating its parent directories; the file
        appears whole or not at all (written beside it, then renamed). Returns the path.

        Raises ObjectNotFoundError (a FileNotFoundError) when there is no such key."""
        client = self._client("download")
        _check_name("download", "bucket", bucket)
        _check_name("download", "key", key)
        destination = Path(local_path)
        if destination.is_dir():
            raise IsADirectoryError(
                f"Storage.download: {str(destination)!r} is a directory; pass the path of "
                "the file to write"
            )
        size = self._head(client, bucket, key, required=True)["ContentLength"]
        destination.parent.mkdir(parents=True, exist_ok=True)
        from skyward.storage import s3

        descriptor, partial = tempfile.mkstemp(
            dir=destination.parent, prefix=f".{destination.name}.", suffix=".part"
        )
        try:
            with (
                os.fdopen(descriptor, "wb") as sink,
                self._tracking("download", bucket, key, size) as tracker,
            ):
                self._run(
                    s3.Target(self.endpoint, bucket, key),
                    lambda: client.download_fileobj(
                        bucket, key, sink, Config=s3.TRANSFER, Callback=tracker
                    ),
                )
            os.replace(partial, destination)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
        return destination

    def ls(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key in ``bucket`` that starts with ``prefix``, in key order (all pages)."""
        client = self._client("ls")
        _check_name("ls", "bucket", bucket)
        if not isinstance(prefix, str):
            raise fail("Storage.ls", "prefix", prefix, "it must be a str")
        from skyward.storage import s3

        def listing() -> list[str]:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            return [item["Key"] for page in pages for item in page.get("Contents", ())]

        return self._run(s3.Target(self.endpoint, bucket), listing)

    def exists(self, bucket: str, key: str) -> bool:
        """Whether ``key`` exists; a missing bucket raises BucketNotFoundError."""
        client = self._client("exists")
        _check_name("exists", "bucket", bucket)
        _check_name("exists", "key", key)
        return bool(self._head(client, bucket, key, required=False))

    def rm(self, bucket: str, key: str) -> None:
        """Delete ``key``; raises ObjectNotFoundError if there is none."""
        client = self._client("rm")
        _check_name("rm", "bucket", bucket)
        _check_name("rm", "key", key)
        from skyward.storage import s3

        self._head(client, bucket, key, required=True)
        self._run(
            s3.Target(self.endpoint, bucket, key),
            lambda: client.delete_object(Bucket=bucket, Key=key),
        )

    def _open(self) -> S3Client:
        """A client holding leased credentials until the last ``with`` block ends."""
        from skyward.storage import s3

        access_key, secret_key = resolve_pair(self.access_key, self.secret_key, self.endpoint)
        try:
            return s3.make_client(
                self.endpoint, self.region, access_key, secret_key, path_style=self.path_style
            )
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        release_credential(self.access_key)
        release_credential(self.secret_key)

    def _client(self, method: str) -> S3Client:
        client = self._session.client
        if client is None:
            raise RuntimeError(
                f"Storage.{method}() needs an open storage: call it inside `with storage:` "
                "(e.g. `with sky.storage.S3(region=...) as s3: s3.ls(...)`)"
            )
        return client

    def _head(self, client: S3Client, bucket: str, key: str, *, required: bool) -> ObjectHead:
        """The object's metadata, or {} when it is missing and not ``required``. A 404
        is told apart from a missing bucket by asking for the bucket."""
        from skyward.storage import s3

        try:
            return self._run(
                s3.Target(self.endpoint, bucket, key),
                lambda: client.head_object(Bucket=bucket, Key=key),
            )
        except ObjectNotFoundError:
            self._run(s3.Target(self.endpoint, bucket), lambda: client.head_bucket(Bucket=bucket))
            if required:
                raise
            return {}

    @staticmethod
    def _run(target: s3.Target, call: Callable[[], T]) -> T:
        from skyward.storage import s3

        try:
            return call()
        except Exception as error:
            translated = s3.translate(error, target)
            if translated is error:
                raise
            raise translated from None

    @contextmanager
    def _tracking(
        self, direction: Direction, bucket: str, key: str, total: int
    ) -> Iterator[TransferTracker | None]:
        sink = current_progress()
        if sink is None:
            yield None
            return
        tracker = TransferTracker(sink, direction, bucket, key, total)
        try:
            yield tracker
        finally:
            tracker.finish()


def _check_ship_client_credentials(storage: Storage) -> None:
    """Raise ValueError unless ``storage.ship_client_credentials`` is a bool, and True
    only for a storage without keys of its own on AWS's S3 (``is_aws_s3``)."""
    value = storage.ship_client_credentials
    if not isinstance(value, bool):
        raise fail("Storage", "ship_client_credentials", value, "it must be True or False")
    if not value:
        return
    if storage.access_key is not None:
        raise fail(
            "Storage", "ship_client_credentials", value,
            "the storage has keys of its own, which are what the nodes get; pass either "
            "the keys or ship_client_credentials=True",
        )
    if not is_aws_s3(storage.endpoint):
        raise fail(
            "Storage", "ship_client_credentials", value,
            f"this machine's AWS credential chain is sent only to AWS's own S3 "
            f"(https://s3.<region>.amazonaws.com), never to another service such as "
            f"{storage.endpoint}; pass access_key= and secret_key= scoped to the bucket",
        )


def _check_name(method: str, field: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise fail(f"Storage.{method}", field, value, "it must be a non-empty str")
