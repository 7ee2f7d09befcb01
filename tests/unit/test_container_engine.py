"""``sky.Container``'s engine side without an engine: which socket it picks and why it
refuses one, and how it reads the engine's answers that are not one JSON document (a
pull's progress stream, a log stream's frames, nanosecond times)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyward.providers.cloud.api import epoch
from skyward.providers.container.api import FRAME_HEADER, _pull_error
from skyward.providers.container.engine import EngineError, find_socket


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "engine.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        yield path
    finally:
        server.close()


def test_the_socket_given_wins_over_the_environment(listening: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere/docker.sock")
    assert find_socket(listening) == listening
    assert find_socket(f"unix://{listening}") == listening


def test_docker_host_then_container_host(listening: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("CONTAINER_HOST", f"unix://{listening}")
    assert find_socket() == listening
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere/docker.sock")
    with pytest.raises(EngineError, match=r"DOCKER_HOST='unix:///nowhere/docker.sock'.*sky\.Local\(\)"):
        find_socket()


def test_a_tcp_engine_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2375")
    with pytest.raises(EngineError, match="DOCKER_HOST='tcp://10.0.0.5:2375'.*Unix socket"):
        find_socket()


def test_a_file_that_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "docker.sock"
    plain.write_text("")
    with pytest.raises(EngineError, match="Container.socket"):
        find_socket(str(plain))


def test_a_pull_stream_s_error_is_found_on_any_line() -> None:
    stream = '{"status":"Pulling from library/python"}\n{"status":"Downloading"}\n' \
             '{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}\n'
    assert _pull_error(stream) == "manifest unknown"
    assert _pull_error('{"status":"Pulling"}\n{"status":"Status: Image is up to date"}\n') is None
    assert _pull_error({"status": "Downloaded"}) is None


def test_log_frames_lose_their_headers() -> None:
    lines = [b"E: Unable to locate package openssh-server\n", b"done\n"]
    raw = b"".join(bytes([2, 0, 0, 0]) + len(line).to_bytes(4, "big") + line for line in lines)
    assert FRAME_HEADER.sub("", raw.decode()) == "E: Unable to locate package openssh-server\ndone\n"


def test_engine_times_with_nanoseconds_are_read() -> None:
    assert epoch("2024-05-01T12:00:00.123456789Z") == pytest.approx(1714564800.123456)
    assert epoch("2024-05-01T12:00:00Z") == 1714564800.0
    assert epoch("2024-05-01T12:00:00.5+02:00") == 1714557600.5
    assert epoch("2024-05-01T12:00:00") == 1714564800.0, "no offset: UTC, not the local time"
    assert epoch("garbage") is None and epoch(None) is None
