"""The one codec: every byte string skyward turns back into objects goes through here.

Two kinds of bytes cross skyward's channels, and they are decoded differently:

- **Control messages** (``messages``: what the client, a head relay and a node agent say
  to each other) are msgpack arrays. Decoding builds nothing but ints, floats, strings,
  bytes, None, booleans and tuples, then one of the registered message classes: hostile
  bytes give ``MalformedFrame``, never an object of the sender's choosing.
- **User payloads** (functions, arguments, results, exceptions, collection values, event
  batches) are cloudpickles, and loading a pickle runs code of its author's choosing.
  ``load_payload`` is the only place skyward loads them, and it is called only on bytes
  from a peer that proved itself: a Ray peer (Ray's token), a lane or relay peer (the
  HMAC exchange of ``handshake``), a child process over its private pipe, a file in a
  0700 directory of the pool's user. A node is trusted like the client, as with Ray and
  Dask: its results are unpickled.

On the remote path (the stream between a client and its head relay, over SSH) a large
message may travel compressed (lz4, ``relay_frame``): only when it has ``COMPRESS_FROM``
bytes or more and a quick look at samples of it says it compresses to ``WORTH`` or less
(docs/benchmarks.md, group P, has the measurements). A flag byte in the frame's header
says so, and the receiver expands it only after the handshake, bounded (``expand``).
"""

from __future__ import annotations

import dataclasses
import json
import reprlib
import socket
import struct
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal

import cloudpickle
import lz4.block
import lz4.frame
import msgpack

from skyward.core.messages import MESSAGES, RECORDS, Message

FRAME_HEADER = struct.Struct("!Q")
"""A frame is its length (8 bytes, big-endian), then that many bytes."""


class MalformedFrame(ValueError):
    """Bytes that are not a frame of the expected kind (a stranger's or a corrupted one)."""


def load_payload(data: bytes | memoryview, buffers: Iterable[object] | None = None) -> Any:
    """A user payload (cloudpickle, out-of-band ``buffers`` if any) from an authenticated
    peer: whatever was pickled, which callers unpack into the types they sent. Raises
    whatever the payload's own unpickling raises."""
    return cloudpickle.loads(data, buffers=buffers)


def frame(message: Message) -> bytes:
    """``message`` framed: its length, then ``encode_message``'s bytes."""
    data = encode_message(message)
    return FRAME_HEADER.pack(len(data)) + data


def read_frame(connection: socket.socket, limit: int = 1 << 20) -> Message | None:
    """The next framed message on a blocking socket, or None at the end of the stream.
    ``MalformedFrame`` when it is not one, or longer than ``limit`` bytes."""
    header = recv_exactly(connection, FRAME_HEADER.size)
    if header is None:
        return None
    size = FRAME_HEADER.unpack(header)[0]
    if size > limit:
        raise MalformedFrame(f"a frame of {size} bytes, over the limit of {limit}")
    body = recv_exactly(connection, size)
    if body is None:
        raise MalformedFrame("the stream ended inside a frame")
    return decode_message(body)


def recv_exactly(connection: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from a blocking socket, or None if it ends first."""
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


COMPRESSED = 0x01
"""The flag of a relay frame whose body is compressed (``relay_frame``)."""
COMPRESS_FROM = 256 << 10
"""Relay frames smaller than this travel as they are: compressing them saves too little."""
EXPANDED_LIMIT = 1 << 32
"""The most bytes a compressed relay frame may expand to; a larger message travels plain."""
WORTH = 0.9
"""A compressed body is sent only when at most this share of the plain one."""
_FLAG_SHIFT = 56
_SIZE_MASK = (1 << _FLAG_SHIFT) - 1
_EXPANDED = struct.Struct("!Q")
_SAMPLE = 64 << 10
_SAMPLES = 4
_MAX_RATIO = 256
"""lz4 cannot expand a byte into more than 255: a body that claims more is not lz4's."""


def relay_frame(data: bytes, compress: bool = False) -> tuple[bytes, ...]:
    """An encoded message as the parts of one relay frame. A relay frame is 8 bytes, a flag
    byte then the body's length (56 bits, big-endian), then the body: with no flag (a
    protocol-1 frame, byte for byte) the message itself; with ``COMPRESSED``, the message's
    length (8 bytes) and its lz4 frame. ``compress`` (the remote path's streams) sends a
    message of ``COMPRESS_FROM`` bytes or more compressed when ``shrink`` says it pays."""
    packed = shrink(data) if compress else None
    if packed is None:
        return FRAME_HEADER.pack(len(data)), data
    header = FRAME_HEADER.pack(COMPRESSED << _FLAG_SHIFT | (_EXPANDED.size + len(packed)))
    return header, _EXPANDED.pack(len(data)), packed


def frame_header(header: bytes) -> tuple[int, int]:
    """A relay frame's flags and body length from its 8 header bytes; ``MalformedFrame``
    for a flag this version does not know."""
    word = FRAME_HEADER.unpack(header)[0]
    flags = word >> _FLAG_SHIFT
    if flags & ~COMPRESSED:
        raise MalformedFrame(f"a frame with flags {flags:#04x}, which this version does not know")
    return flags, word & _SIZE_MASK


def shrink(data: bytes) -> bytes | None:
    """``data`` compressed (lz4, its fast level) when that pays, else None: when it has
    ``COMPRESS_FROM`` bytes or more, a few 64 KiB samples spread over it compress to at
    most ``WORTH`` of their size (a cheap look: random numbers or packed images are left
    alone for the price of the samples), and so does the whole."""
    size = len(data)
    if size < COMPRESS_FROM or size > EXPANDED_LIMIT:
        return None
    view = memoryview(data)
    step = (size - _SAMPLE) // (_SAMPLES - 1)
    sampled = sum(
        len(lz4.block.compress(view[i * step:i * step + _SAMPLE], store_size=False)) for i in range(_SAMPLES)
    )
    if sampled > WORTH * _SAMPLE * _SAMPLES:
        return None
    packed: bytes = lz4.frame.compress(data, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    return packed if len(packed) <= WORTH * size else None


def expand(body: bytes | memoryview, limit: int = EXPANDED_LIMIT) -> bytes:
    """The message a ``COMPRESSED`` frame's body holds, from an authenticated peer.
    ``MalformedFrame``, before expanding anything, when it says it expands beyond
    ``limit`` bytes or beyond what lz4 can make of its size; and when it is not lz4 or
    does not expand to exactly what it says. So a corrupt or hostile frame costs at most
    ``limit`` bytes of memory."""
    if len(body) < _EXPANDED.size:
        raise MalformedFrame("a compressed frame without its size")
    size = _EXPANDED.unpack_from(body)[0]
    if size > limit:
        raise MalformedFrame(f"a compressed frame expanding to {size} bytes, over the limit of {limit}")
    if size > _MAX_RATIO * len(body):
        raise MalformedFrame(f"a compressed frame of {len(body)} bytes cannot expand to {size}")
    decompressor = lz4.frame.LZ4FrameDecompressor()
    try:
        data: bytes = decompressor.decompress(memoryview(body)[_EXPANDED.size:], max_length=size)
    except Exception as exc:  # lz4's RuntimeError on bytes that are not its frame
        raise MalformedFrame(f"a compressed frame that is not lz4: {exc}") from None
    if len(data) != size or not decompressor.eof or decompressor.unused_data:
        raise MalformedFrame(f"a compressed frame that does not expand to the {size} bytes it says")
    return data


def _field_types(cls: type[Message]) -> tuple[tuple[str, object], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


_CLASSES: dict[str, tuple[type[Message], tuple[tuple[str, object], ...]]] = {
    cls.__name__: (cls, _field_types(cls)) for cls in MESSAGES
}
_RECORDS: dict[type, tuple[tuple[str, object], ...]] = {cls: _field_types(cls) for cls in RECORDS}


def encode_message(message: Message) -> bytes:
    """``message`` as a msgpack array: its class name, then its fields in order (a record
    among them as the array of its own fields)."""
    fields = [getattr(message, name) for name, _ in _CLASSES[type(message).__name__][1]]
    packed: bytes = msgpack.packb([type(message).__name__, *fields], use_bin_type=True, default=_record)
    return packed


def _record(value: object) -> list[object]:
    """msgpack's hook for what it cannot pack: a record (``messages.RECORDS``) as the
    array of its fields; TypeError for anything else."""
    fields = _RECORDS.get(type(value))
    if fields is None:
        raise TypeError(f"a message cannot carry a {type(value).__name__}")
    return [getattr(value, name) for name, _ in fields]


def decode_message(data: bytes | memoryview) -> Message:
    """The message ``encode_message`` made of ``data``. ``MalformedFrame`` when ``data``
    is not one: not msgpack, an unknown class, a wrong field count or a field whose type
    is not its annotation's."""
    try:
        items = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=True)
    except Exception as exc:
        raise MalformedFrame(f"not a message: {type(exc).__name__}: {exc}") from None
    return _message(items)


MARKER = "::"
"""What starts a line that carries a message among a remote script's other output."""


def marker(message: Message) -> str:
    """``message`` as one line of text (``MARKER``, then its class name and fields as a
    JSON array), for a script that reports on its stdout. Its fields must be JSON's
    (no bytes)."""
    fields = [getattr(message, name) for name, _ in _CLASSES[type(message).__name__][1]]
    return MARKER + json.dumps([type(message).__name__, *fields])


def read_marker(line: str) -> Message | None:
    """The message a ``marker`` line carries; None for a line that is not one (what else
    the host printed). ``MalformedFrame`` for a marked line that is not a message."""
    if not line.startswith(MARKER):
        return None
    try:
        items = json.loads(line[len(MARKER):], object_hook=_no_objects)
    except ValueError as exc:
        raise MalformedFrame(f"not a message: {exc}: {reprlib.repr(line)}") from None
    return _message(_tuples(items))


def _no_objects(value: dict[str, object]) -> object:
    raise ValueError(f"a message holds no JSON object: {reprlib.repr(value)}")


def _tuples(value: object) -> object:
    """JSON's arrays as the tuples msgpack decodes them into."""
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def _message(items: object) -> Message:
    """The message of the decoded array ``items`` (see ``decode_message``)."""
    if not isinstance(items, tuple) or not items or not isinstance(items[0], str) or items[0] not in _CLASSES:
        raise MalformedFrame(f"not a message: {reprlib.repr(items)}")
    cls, fields = _CLASSES[items[0]]
    values = items[1:]
    if len(values) != len(fields):
        raise MalformedFrame(f"{cls.__name__} takes {len(fields)} fields, got {len(values)}")
    return cls(*(_decoded(value, hint, f"{cls.__name__}.{name}") for (name, hint), value in zip(fields, values)))


def _decoded(value: object, hint: Any, where: str) -> Any:
    """``value`` as field ``where`` of annotation ``hint`` holds it: a record (or a tuple of
    records) built from its arrays, anything else as it is. ``MalformedFrame`` when it is
    not of ``hint``."""
    record = _RECORDS.get(hint)
    if record is not None:
        if not isinstance(value, tuple) or len(value) != len(record):
            raise MalformedFrame(f"{where} is not a {hint.__name__} of {len(record)} fields: {reprlib.repr(value)}")
        return hint(*(_decoded(item, field_hint, f"{where}.{name}") for (name, field_hint), item in zip(record, value)))
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in _RECORDS:
        if not isinstance(value, tuple):
            raise MalformedFrame(f"{where} is not a tuple: {reprlib.repr(value)}")
        return tuple(_decoded(item, args[0], f"{where}[{index}]") for index, item in enumerate(value))
    if not _conforms(value, hint):
        raise MalformedFrame(f"{where} is not {hint}: {reprlib.repr(value)}")
    return value


def _conforms(value: object, hint: Any) -> bool:
    """Whether ``value`` is of the (simple) annotation ``hint``: a class or a typing form
    (a union, a Literal, a tuple), which typing's own functions take untyped."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(item, args[0]) for item in value)
        return len(value) == len(args) and all(_conforms(v, a) for v, a in zip(value, args))
    return isinstance(value, hint)
