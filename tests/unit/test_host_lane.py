"""A collection host's lane (``collections.host_lane``): real Unix sockets, a real
server thread, and a second account for what a stranger gets."""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyward.collections.host_lane import HostLaneClient, HostLaneServer, lane_path


@pytest.fixture
def directory() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="skyward-hl-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_request_gets_the_hosts_answer_and_the_connection_is_kept(directory: str) -> None:
    served: list[bytes] = []

    def serve(request: bytes) -> bytes:
        served.append(request)
        return request[::-1]

    path = lane_path(directory, "0123456789abcdef", 3)
    assert path == os.path.join(directory, "host-0123456789ab-3.sock")
    server = HostLaneServer(path, serve)
    client = HostLaneClient(path)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert client.call(b"abc", 5.0) == b"cba"
        big = os.urandom(3 << 20)
        assert client.call(big, 5.0) == big[::-1]
        assert served == [b"abc", big]
        assert len(client._idle) == 1, "one caller at a time: one connection, kept for the next call"
    finally:
        client.close()
        server.close()
    assert not os.path.exists(path)


def test_a_lane_nobody_serves_carries_nothing_and_is_given_up(directory: str) -> None:
    client = HostLaneClient(os.path.join(directory, "host-none-0.sock"))
    assert client.call(b"abc", 5.0) is None
    assert not client.usable
    assert client.call(b"abc", 5.0) is None


def test_a_request_the_host_refuses_is_left_to_ray_and_the_lane_stays(directory: str) -> None:
    def serve(request: bytes) -> bytes:
        if request == b"malformed":
            raise ValueError("not a request")
        return b"ok"

    path = lane_path(directory, "pool", 0)
    server = HostLaneServer(path, serve)
    client = HostLaneClient(path)
    try:
        assert client.call(b"malformed", 5.0) is None, "the host closed the connection: send it through Ray"
        assert client.usable
        assert client.call(b"fine", 5.0) == b"ok"
    finally:
        client.close()
        server.close()


def test_an_answer_that_does_not_come_in_time_raises_and_the_next_call_is_not_confused(directory: str) -> None:
    release = threading.Event()

    def serve(request: bytes) -> bytes:
        if request == b"slow":
            release.wait(10)
        return request

    path = lane_path(directory, "pool", 1)
    server = HostLaneServer(path, serve)
    client = HostLaneClient(path)
    try:
        began = time.monotonic()
        with pytest.raises(TimeoutError, match="no answer within 0.3s"):
            client.call(b"slow", 0.3)
        assert time.monotonic() - began < 3
        release.set()
        assert client.call(b"next", 5.0) == b"next", "the late answer went to the dropped connection"
    finally:
        client.close()
        server.close()


def test_a_path_too_long_for_a_unix_socket_gives_no_lane() -> None:
    assert lane_path("/tmp/" + "d" * 100, "pool", 0) == ""
    assert lane_path("", "pool", 0) == ""


def test_another_account_is_refused_before_a_byte_is_read(directory: str) -> None:
    """Even where the socket's mode and directory would let another user connect (a
    misconfigured machine), the host reads nothing from a peer that is not its user:
    a pickle that would create a marker is never unpickled, nor even handed to ``serve``."""
    from stranger import stranger, touching

    served: list[bytes] = []
    marks = tempfile.mkdtemp(prefix="skyward-hl-marks-", dir="/var/tmp")
    os.chmod(marks, 0o777)
    path = lane_path(directory, "pool", 2)
    server = HostLaneServer(path, lambda request: served.append(request) or bytes(pickle.loads(request)))
    try:
        os.chmod(directory, 0o755)
        os.chmod(path, 0o666)
        marker = Path(marks) / "host-lane"
        frame = touching(marker)
        with stranger() as probe:
            answer = probe.run({
                "op": "unix_send", "path": path, "data": (struct.pack("!Q", len(frame)) + frame).hex(), "wait": 2.0,
            })
        assert answer["connected"], answer
        assert answer["reply"] == 0, answer
        time.sleep(0.5)
        assert served == [] and not marker.exists()
        client = HostLaneClient(path)
        assert client.call(pickle.dumps(b"mine"), 5.0) == b"mine", "this user is still served"
        client.close()
        assert len(served) == 1
    finally:
        server.close()
        shutil.rmtree(marks, ignore_errors=True)


def test_a_forked_child_leaves_its_parents_lane_alone(directory: str) -> None:
    """A child forked by a task inherits its parent's connections and tickets: it sends
    through Ray (``None`` here), and the parent's lane still answers the parent."""
    served: list[bytes] = []
    path = lane_path(directory, "pool", 4)
    server = HostLaneServer(path, lambda request: served.append(request) or request)
    client = HostLaneClient(path)
    try:
        assert client.call(b"parent", 5.0) == b"parent"
        child = os.fork()
        if child == 0:
            os._exit(0 if client.call(b"child", 5.0) is None else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child used its parent's lane"
        assert client.call(b"parent again", 5.0) == b"parent again"
        assert served == [b"parent", b"parent again"]
    finally:
        client.close()
        server.close()


def test_a_call_still_running_when_the_lane_is_closed_does_not_keep_its_connection(directory: str) -> None:
    release = threading.Event()
    path = lane_path(directory, "pool", 5)
    server = HostLaneServer(path, lambda request: release.wait(10) and request)
    client = HostLaneClient(path)
    answers: list[bytes | None] = []
    try:
        caller = threading.Thread(target=lambda: answers.append(client.call(b"late", 10.0)))
        caller.start()
        time.sleep(0.3)
        client.close()
        release.set()
        caller.join(10)
        assert answers == [b"late"]
        assert len(client._idle) == 0 and not client.usable
        assert client.call(b"after", 5.0) is None
    finally:
        server.close()


def test_an_asyncio_run_does_not_make_an_inline_call() -> None:
    """A blocking call would hold the event loop: an asyncio run sends the steps None
    (the collection's call then goes through Ray); a blocking run makes it."""
    import asyncio

    from skyward.collections.steps import Inline, Steps, Wait, run, run_async

    def operation() -> Steps[object]:
        return (yield Wait(Inline(lambda timeout: ("made", timeout)), 2.0, "an inline call"))

    assert asyncio.run(run_async(operation())) is None
    assert run(operation()) == ("made", 2.0)
