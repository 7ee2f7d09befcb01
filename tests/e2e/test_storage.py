"""sky.Storage against a real S3-compatible server (moto in server mode on 127.0.0.1):
transfers, listing, errors, credentials and progress, with nothing of ours mocked."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from storage_server import MotoServer, free_port

import skyward as sky
from skyward.storage import (
    BucketNotFoundError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageCredentialsError,
    TransferUpdate,
    use_progress,
)
from skyward.storage.hyperstack import HyperstackAccessKey, HyperstackKeyPart

MIB = 1024 * 1024


def storage_for(server: MotoServer, **overrides: object) -> sky.Storage:
    fields: dict[str, object] = {
        "endpoint": server.endpoint, "access_key": server.access_key,
        "secret_key": server.secret_key, "path_style": True,
    }
    fields.update(overrides)
    return sky.Storage(**fields)  # type: ignore[arg-type]


def write_random(path: Path, size: int) -> str:
    """Write ``size`` random bytes to ``path``; returns their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left:
            chunk = os.urandom(min(left, 8 * MIB))
            digest.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(8 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def test_roundtrip_upload_ls_exists_download_rm(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "model.bin"
    source.write_bytes(b"weights \x00\x01\x02" * 1000)
    with storage_for(moto_server) as storage:
        key = storage.upload(bucket, source, key="checkpoints/model.bin")
        assert key == "checkpoints/model.bin"
        assert storage.upload(bucket, str(source)) == "model.bin"  # key defaults to base name
        assert storage.ls(bucket) == ["checkpoints/model.bin", "model.bin"]
        assert storage.exists(bucket, "checkpoints/model.bin")
        assert not storage.exists(bucket, "checkpoints/other.bin")
        target = storage.download(bucket, "checkpoints/model.bin", tmp_path / "a" / "b" / "m.bin")
        assert target.read_bytes() == source.read_bytes()
        storage.rm(bucket, "checkpoints/model.bin")
        assert storage.ls(bucket) == ["model.bin"]
        assert not storage.exists(bucket, "checkpoints/model.bin")
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["m.bin"]  # no temp file left


def test_ls_filters_by_prefix(moto_server: MotoServer, bucket: str, tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_text("x")
    with storage_for(moto_server) as storage:
        for key in ("data/a", "data/b", "datasets/c", "logs/d"):
            storage.upload(bucket, source, key=key)
        assert storage.ls(bucket, prefix="data/") == ["data/a", "data/b"]
        assert storage.ls(bucket, prefix="data") == ["data/a", "data/b", "datasets/c"]
        assert storage.ls(bucket, prefix="nothing/") == []


def test_ls_returns_every_key_past_one_page(moto_server: MotoServer, bucket: str) -> None:
    keys = [f"shard/{index:05d}" for index in range(1234)]  # S3 pages hold 1000 keys
    client = moto_server.client()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=b""), keys))
    with storage_for(moto_server) as storage:
        assert storage.ls(bucket) == keys
        assert len(storage.ls(bucket, prefix="shard/01")) == 234


def test_missing_key_is_a_file_not_found_error_naming_bucket_and_key(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    with storage_for(moto_server) as storage:
        with pytest.raises(ObjectNotFoundError) as download:
            storage.download(bucket, "no/such.key", tmp_path / "out" / "x")
        with pytest.raises(FileNotFoundError) as remove:
            storage.rm(bucket, "no/such.key")
    for error in (download.value, remove.value):
        assert f"s3://{bucket}/no/such.key" in str(error)
        assert moto_server.endpoint in str(error)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_missing_bucket_names_bucket_and_endpoint(moto_server: MotoServer, tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_text("x")
    calls = {
        "ls": lambda s: s.ls("no-such-bucket"),
        "exists": lambda s: s.exists("no-such-bucket", "k"),
        "upload": lambda s: s.upload("no-such-bucket", source),
        "download": lambda s: s.download("no-such-bucket", "k", tmp_path / "x"),
        "rm": lambda s: s.rm("no-such-bucket", "k"),
    }
    with storage_for(moto_server) as storage:
        for name, call in calls.items():
            with pytest.raises(BucketNotFoundError) as caught:
                call(storage)
            message = str(caught.value)
            assert "'no-such-bucket'" in message and moto_server.endpoint in message, name
            assert caught.value.__cause__ is None and caught.value.__suppress_context__, name


def test_methods_outside_with_say_how_to_open(moto_server: MotoServer) -> None:
    storage = storage_for(moto_server)
    for call in (lambda: storage.ls("b"), lambda: storage.exists("b", "k")):
        with pytest.raises(RuntimeError, match="with storage:"):
            call()
    with storage:
        with storage:  # nested blocks share the client
            pass
        storage.ls  # still open after the inner block  # noqa: B018
    with pytest.raises(RuntimeError, match="with storage:"):
        storage.ls("b")


def test_credentials_from_strings_callables_and_async_callables(
    moto_auth_server: MotoServer, tmp_path: Path
) -> None:
    server = moto_auth_server
    bucket = server.new_bucket()
    source = tmp_path / "f"
    source.write_text("secretless")

    async def secret() -> str:
        await asyncio.sleep(0)
        return server.secret_key

    variants = {
        "strings": storage_for(server),
        "callables": storage_for(server, access_key=lambda: server.access_key,
                                 secret_key=lambda: server.secret_key),
        "async callables": storage_for(server, secret_key=secret),
    }
    for name, storage in variants.items():
        with storage:
            storage.upload(bucket, source, key=name)
    with storage_for(server) as storage:
        assert storage.ls(bucket) == sorted(variants)

    async def inside_a_running_loop() -> list[str]:
        with storage_for(server, secret_key=secret) as storage:
            return storage.ls(bucket)

    assert asyncio.run(inside_a_running_loop()) == sorted(variants)
    server.drop_bucket(bucket)


def test_bad_credentials_say_which_to_check_without_the_secret(
    moto_auth_server: MotoServer,
) -> None:
    server = moto_auth_server
    bucket = server.new_bucket()
    wrong_key = storage_for(server, access_key="AKIAUNKNOWNKEY000000")
    wrong_secret = storage_for(server, secret_key="not-the-secret-value")
    for storage, field in ((wrong_key, "access_key"), (wrong_secret, "secret_key")):
        with storage, pytest.raises(StorageCredentialsError) as caught:
            storage.ls(bucket)
        message = str(caught.value)
        assert f"check {field}" in message and server.endpoint in message
        assert "not-the-secret-value" not in message and server.secret_key not in message
        with storage, pytest.raises(StorageCredentialsError) as caught:
            storage.exists(bucket, "k")  # HEAD: a bare 403, no error code
        assert "access_key and secret_key" in str(caught.value)
    server.drop_bucket(bucket)


def test_unreachable_endpoint_fails_fast_naming_it() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with (
        sky.Storage(endpoint, "k", "s", path_style=True) as storage,
        pytest.raises(EndpointUnreachableError) as caught,
    ):
        storage.ls("some-bucket")
    assert time.monotonic() - started < 8
    assert endpoint in str(caught.value)


def test_progress_reports_cumulative_bytes_to_the_installed_sink(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "f"
    source.write_bytes(os.urandom(3 * MIB))
    updates: list[TransferUpdate] = []
    with use_progress(updates.append), storage_for(moto_server) as storage:
        storage.upload(bucket, source, key="k")
        storage.download(bucket, "k", tmp_path / "g")
    for direction in ("upload", "download"):
        mine = [u for u in updates if u.direction == direction]
        assert mine[0].done == 0 and mine[-1].finished and mine[-1].done == 3 * MIB
        assert all(u.total == 3 * MIB and u.key == "k" for u in mine)
        assert [u.done for u in mine] == sorted(u.done for u in mine)


def test_200_mb_file_moves_in_parts_and_arrives_identical(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    size = 200 * MIB
    source = tmp_path / "big.bin"
    digest = write_random(source, size)
    updates: list[TransferUpdate] = []
    with use_progress(updates.append), storage_for(moto_server) as storage:
        storage.upload(bucket, source, key="big/blob.bin")
        source.unlink()
        target = storage.download(bucket, "big/blob.bin", tmp_path / "back" / "blob.bin")
    assert sha256(target) == digest
    etag = moto_server.client().head_object(Bucket=bucket, Key="big/blob.bin")["ETag"]
    assert int(etag.strip('"').rsplit("-", 1)[1]) > 1  # a multipart upload's ETag: md5-<parts>
    ranged_gets = [
        line for line in moto_server.log_text().splitlines()
        if f"GET /{bucket}/big/blob.bin" in line and '" 206 ' in line
    ]
    assert len(ranged_gets) > 1  # downloaded as several byte ranges
    finished = [u for u in updates if u.finished]
    assert [(u.direction, u.done) for u in finished] == [("upload", size), ("download", size)]


class _FakeHyperstackAPI(BaseHTTPRequestHandler):
    """Answers like Hyperstack's access-keys API, handing out the moto server's keys."""

    calls: ClassVar[list[tuple[str, str, str, dict[str, object]]]] = []
    keys: ClassVar[tuple[str, str]] = ("", "")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.calls.append(("POST", self.path, self.headers["api_key"], body))
        answer = {"id": 77, "access_key": self.keys[0], "secret_key": self.keys[1],
                  "region": body["region"]}
        self._reply(201, json.dumps(answer).encode())

    def do_DELETE(self) -> None:
        self.calls.append(("DELETE", self.path, self.headers["api_key"], {}))
        self._reply(200, b"{}")

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hyperstack_api(moto_server: MotoServer) -> Iterator[str]:
    _FakeHyperstackAPI.calls = []
    _FakeHyperstackAPI.keys = (moto_server.access_key, moto_server.secret_key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHyperstackAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_hyperstack_key_is_minted_on_open_and_revoked_on_close(
    moto_server: MotoServer, bucket: str, hyperstack_api: str
) -> None:
    key = HyperstackAccessKey("my-api-key", "CANADA-1", api_url=hyperstack_api)
    storage = sky.Storage(
        moto_server.endpoint, HyperstackKeyPart(key, 0), HyperstackKeyPart(key, 1),
        path_style=True,
    )
    with storage:
        assert storage.ls(bucket) == []
        with storage.credentials() as resolved:  # a second holder reuses the same key
            assert resolved.access_key == moto_server.access_key
    assert _FakeHyperstackAPI.calls == [
        ("POST", "/v1/object-storage/access-keys", "my-api-key", {"region": "CANADA-1"}),
        ("DELETE", "/v1/object-storage/access-keys/77", "my-api-key", {}),
    ]
