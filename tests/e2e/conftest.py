"""Fixtures of the end-to-end tests: a sandbox for a client process; moto S3 servers for
the session and a bucket per test (storage tests)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_server import MotoServer


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto S3 server on 127.0.0.1 that accepts any credentials."""
    pytest.importorskip("moto", reason="moto[server] is not installed (pip install -e '.[test]')")
    server = MotoServer.start(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """A moto S3 server that checks signatures: only its own keys are accepted."""
    pytest.importorskip("moto", reason="moto[server] is not installed (pip install -e '.[test]')")
    server = MotoServer.start(tmp_path_factory.mktemp("moto-auth"), auth=True)
    yield server
    server.stop()


@pytest.fixture
def bucket(moto_server: MotoServer) -> Iterator[str]:
    """A fresh, empty bucket on ``moto_server``, deleted with its contents afterwards."""
    name = moto_server.new_bucket()
    yield name
    moto_server.drop_bucket(name)


@pytest.fixture
def sandbox() -> Iterator[dict[str, str]]:
    """A fresh HOME and TMPDIR for one client process (short paths: Ray uses unix sockets)."""
    base = tempfile.mkdtemp(prefix="skt", dir="/tmp")
    home, tmp = os.path.join(base, "home"), os.path.join(base, "tmp")
    os.makedirs(home)
    os.makedirs(tmp)
    env = {**os.environ, "HOME": home, "TMPDIR": tmp, "PYTHONUNBUFFERED": "1"}
    try:
        yield {"base": base, "home": home, "tmp": tmp, "env": env}  # type: ignore[dict-item]
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def home(sandbox: dict, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sandbox's $SKYWARD_HOME, for the scripts it runs and for this process (the warm
    engine and pool daemon they reach are the sandbox's own)."""
    path = Path(sandbox["home"]) / ".skyward"
    sandbox["env"]["SKYWARD_HOME"] = str(path)
    monkeypatch.setenv("SKYWARD_HOME", str(path))
    return path
