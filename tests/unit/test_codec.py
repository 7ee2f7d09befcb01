"""Every decoder of bytes from another process, fed hostile bytes: each refuses with
``MalformedFrame`` (or says "not proven"), and none runs code of the bytes' choosing.
And the one place that loads pickles: ``core.codec`` alone, by a grep of skyward/."""

from __future__ import annotations

import os
import pickle
import re
import socket
import threading
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skyward
from skyward.core import handshake
from skyward.core.codec import MalformedFrame, decode_message, encode_message
from skyward.core.messages import MESSAGES, Attach, Call, Failed, Hello, KeptPoolRow, Message, PoolsKept, Reply, TaskOutput
from skyward.engine.transports import lane

SKYWARD = Path(skyward.__file__).parent


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def _hostile(marker: Path) -> list[bytes]:
    exploit = pickle.dumps(_Exploit(marker), protocol=5)
    return [
        b"",
        b"\x00",
        b"\xc1",  # never used in msgpack
        exploit,
        pickle.dumps((1, 2, _Exploit(marker))),
        msgpack.packb(["Call", 1, 2]),  # too few fields
        msgpack.packb(["Call", 1, 2, exploit, None, 5]),  # too many
        msgpack.packb(["PoolsKept", [["kept", "id", 2, 60.0, 0, 1.5, 1e9]]]),  # a record short of a field
        msgpack.packb(["PoolsKept", [["kept", "id", "2", 60.0, 0, 1.5, 1e9, b"d"]]]),  # a record field mistyped
        msgpack.packb(["PoolsKept", ["kept"]]),  # not a record
        msgpack.packb(["Call", "1", 2, b"x", None]),  # a field of the wrong type
        msgpack.packb(["Failed", 1, "boom", 0, "x"]),  # a kind that is not one
        msgpack.packb(["posix.system", "touch x"]),  # no such message
        msgpack.packb({"Call": 1}),
        msgpack.packb([b"Call", 1, 2, b"x", None]),  # the name as bytes
        msgpack.packb(msgpack.ExtType(1, exploit)),
        b"\xdd\xff\xff\xff\xff",  # an array claiming 4G items
        b"\x92" * 100_000 + b"\xc0",  # nested too deep
    ]


def test_every_message_round_trips() -> None:
    samples = {
        Hello: Hello(1), Call: Call(3, 1, (b"h", (b"a", b"b")), 2.5), Failed: Failed(1, "crashed", 2, "gone"),
        Attach: Attach(1, 2, 3, b"setup"), Reply: Reply(7, b"r"),
        PoolsKept: PoolsKept((KeptPoolRow("kept", "id", 2, 60.0, 0, 1.5, 1e9, b"definition"),)),
        TaskOutput: TaskOutput("stderr", "a line"),
    }
    for cls in MESSAGES:
        message = samples.get(cls) or cls(*[_sample(cls.__annotations__[name]) for name in cls.__struct_fields__])
        assert decode_message(encode_message(message)) == message


class _Name(str):
    pass


def test_a_field_carries_a_subclass_of_its_type_as_that_type() -> None:
    """A user's timeout may be numpy's float64, a name a str subclass: msgspec encodes
    neither itself."""
    numpy = pytest.importorskip("numpy")
    decoded = decode_message(encode_message(Call(1, 2, b"x", numpy.float64(2.5))))
    assert decoded == Call(1, 2, b"x", 2.5) and type(decoded.timeout) is float
    failed = decode_message(encode_message(Failed(1, "lost", 2, _Name("gone"))))
    assert failed == Failed(1, "lost", 2, "gone") and type(failed.detail) is str
    with pytest.raises(TypeError, match="cannot carry a PosixPath"):
        encode_message(Call(1, 2, b"x", Path("/")))  # type: ignore[arg-type]


def _sample(hint: object) -> object:
    text = str(hint)
    if text.startswith("tuple[str"):
        return ("a", "b")
    if "bool" in text:
        return True
    if text.startswith("int"):
        return 5
    if text.startswith("str"):
        return "x"
    if text.startswith("float"):
        return 1.5
    return b"bytes"


def test_hostile_bytes_never_decode_into_a_message(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for data in _hostile(marker):
        with pytest.raises(MalformedFrame):
            decode_message(data)
    assert not marker.exists()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_never_escape_as_another_error(data: bytes) -> None:
    for decode, made in ((decode_message, Message), (lane._split, tuple)):
        try:
            decoded = decode(data)
        except MalformedFrame:
            continue
        assert isinstance(decoded, made), (decode, decoded)  # what decodes is of the vocabulary


def test_a_lane_reply_with_buffers_is_split_without_pickle(tmp_path: Path) -> None:
    body = msgpack.packb([b"header", [b"one", b"two"]])
    assert lane._split(body) == (b"header", [b"one", b"two"])
    marker = tmp_path / "ran"
    for data in _hostile(marker) + [msgpack.packb([b"h", ["not bytes"]]), msgpack.packb(["h", []])]:
        with pytest.raises(MalformedFrame):
            lane._split(data)
    assert not marker.exists()


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair()


@pytest.mark.parametrize("garbage", [b"", b"\x00" * 16, b"\x00" * 16 + b"\x00" * 32, os.urandom(48)])
def test_the_handshake_refuses_a_peer_without_the_secret(garbage: bytes) -> None:
    secret = handshake.new_secret()
    server, stranger = _pair()
    answered: list[bool] = []
    thread = threading.Thread(target=lambda: answered.append(handshake.answer_caller(server, secret)))
    thread.start()
    stranger.sendall(garbage)
    stranger.shutdown(socket.SHUT_WR)
    thread.join(handshake.TIMEOUT + 2)
    assert answered == [False]
    server.close()
    stranger.close()


def test_the_handshake_passes_with_the_secret_and_fails_with_another() -> None:
    secret = handshake.new_secret()
    for caller_secret, expected in ((secret, True), (handshake.new_secret(), False)):
        server, caller = _pair()
        answered: list[bool] = []
        thread = threading.Thread(target=lambda: answered.append(handshake.answer_caller(server, secret)))
        thread.start()
        proved = handshake.prove_to_server(caller, caller_secret)
        caller.close()
        thread.join(handshake.TIMEOUT + 2)
        assert answered == [expected] and proved == expected
        server.close()


def test_only_the_codec_module_loads_pickles() -> None:
    """``pickle.loads``/``cloudpickle.loads`` (and ``load``, ``Unpickler``) appear in
    skyward/core/codec.py alone; everything else goes through its ``load_payload`` (for an
    authenticated peer's user payloads) or ``decode_message``."""
    pattern = re.compile(r"\b(cloudpickle|pickle)\.(loads?|Unpickler)\b")
    found = []
    for path in SKYWARD.rglob("*.py"):
        if path == SKYWARD / "core" / "codec.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code) and "``" not in code:
                found.append(f"{path.relative_to(SKYWARD)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_a_hosts_report_is_one_marked_line_among_its_other_output() -> None:
    from skyward.core.codec import marker, read_marker
    from skyward.core.messages import MountFailed, RelayListening, VolumesMounted

    for message in (MountFailed("bucket", "/data", "no s3fs"), RelayListening(41234), VolumesMounted(1.25)):
        line = marker(message)
        assert "\n" not in line and read_marker(line + "\n") == message
    assert read_marker("Welcome to Ubuntu 24.04\n") is None, "a login script's noise is not a message"
    for bad in ('::["RelayListening", "41234"]', '::["posix.system", "x"]', "::watching", '::{"RelayListening": 1}',
                '::["MountFailed", {"bucket": 1}, "m", "c"]'):
        with pytest.raises(MalformedFrame):
            read_marker(bad)


def test_a_marker_line_is_ascii_and_reads_back_whatever_its_text() -> None:
    """A host's error may hold any text, an undecodable file name's lone surrogate among it."""
    from skyward.core.codec import marker, read_marker
    from skyward.core.messages import RelayFailed

    line = marker(RelayFailed("OSError: no such file: caf\u00e9 \udc80"))
    assert line.isascii()
    assert read_marker(line) == RelayFailed("OSError: no such file: caf\u00e9 \\udc80")
