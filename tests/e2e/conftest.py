"""Fixtures of the storage tests: moto S3 servers for the session, a bucket per test."""

from __future__ import annotations

from collections.abc import Iterator

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
