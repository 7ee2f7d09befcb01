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
"""

from __future__ import annotations

import dataclasses
import reprlib
import socket
import struct
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal

import cloudpickle
import msgpack

from skyward.core.messages import MESSAGES, Message

FRAME_HEADER = struct.Struct("!Q")
"""A frame is its length (8 bytes, big-endian), then that many bytes."""


class MalformedFrame(ValueError):
    """Bytes that are not a frame of the expected kind (a stranger's or a corrupted one)."""


def load_payload(data: bytes | memoryview, buffers: Iterable[Any] | None = None) -> Any:
    """A user payload (cloudpickle, out-of-band ``buffers`` if any) from an authenticated
    peer. Raises whatever the payload's own unpickling raises."""
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


def _field_types(cls: type[Message]) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


_CLASSES: dict[str, tuple[type[Message], tuple[tuple[str, Any], ...]]] = {
    cls.__name__: (cls, _field_types(cls)) for cls in MESSAGES
}


def encode_message(message: Message) -> bytes:
    """``message`` as a msgpack array: its class name, then its fields in order."""
    fields = [getattr(message, name) for name, _ in _CLASSES[type(message).__name__][1]]
    return msgpack.packb([type(message).__name__, *fields], use_bin_type=True)  # type: ignore[no-any-return]


def decode_message(data: bytes | memoryview) -> Message:
    """The message ``encode_message`` made of ``data``. ``MalformedFrame`` when ``data``
    is not one: not msgpack, an unknown class, a wrong field count or a field whose type
    is not its annotation's."""
    try:
        items = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=True)
    except Exception as exc:
        raise MalformedFrame(f"not a message: {type(exc).__name__}: {exc}") from None
    if not isinstance(items, tuple) or not items or not isinstance(items[0], str) or items[0] not in _CLASSES:
        raise MalformedFrame(f"not a message: {reprlib.repr(items)}")
    cls, fields = _CLASSES[items[0]]
    values = items[1:]
    if len(values) != len(fields):
        raise MalformedFrame(f"{cls.__name__} takes {len(fields)} fields, got {len(values)}")
    for (name, hint), value in zip(fields, values):
        if not _conforms(value, hint):
            raise MalformedFrame(f"{cls.__name__}.{name} is not {hint}: {reprlib.repr(value)}")
    return cls(*values)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the (simple) annotation ``hint``."""
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
