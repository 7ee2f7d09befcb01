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

import json
import reprlib
import socket
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import cloudpickle
import lz4.block
import lz4.frame
import msgspec

from skyward.core.messages import Message

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

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
    if size < COMPRESS_FROM or size > EXPANDED_LIMIT or not compressible(data):
        return None
    packed: bytes = lz4.frame.compress(data, compression_level=0, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    return packed if len(packed) <= WORTH * size else None


def compressible(data: ReadableBuffer) -> bool:
    """Whether ``data`` (``COMPRESS_FROM`` bytes or more) looks worth compressing: a few
    64 KiB samples spread over it compress to at most ``WORTH`` of their size."""
    view = memoryview(data).cast("B")
    step = (view.nbytes - _SAMPLE) // (_SAMPLES - 1)
    sampled = sum(
        len(lz4.block.compress(view[i * step:i * step + _SAMPLE], store_size=False)) for i in range(_SAMPLES)
    )
    return sampled <= WORTH * _SAMPLE * _SAMPLES


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


def _plain(value: object) -> object:
    """msgspec's hook for what it cannot encode: a subclass of a type a message holds
    (numpy's ``float64`` as a user's timeout, a ``str`` subclass as a name) as a value of
    that type, as msgpack packed them; TypeError for anything else."""
    kinds: tuple[type, ...] = (float, int, str, bytes)
    for kind in kinds:
        if isinstance(value, kind):
            return kind(value)
    raise TypeError(f"a message cannot carry a {type(value).__name__}")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_plain)
_DECODER = msgspec.msgpack.Decoder(Message)
_JSON_DECODER = msgspec.json.Decoder(Message)


def encode_message(message: Message) -> bytes:
    """``message`` as a msgpack array: its class name, then its fields in order (a record
    among them as the array of its own fields)."""
    return _ENCODER.encode(message)


def decode_message(data: bytes | memoryview) -> Message:
    """The message ``encode_message`` made of ``data``. ``MalformedFrame`` when ``data``
    is not one: not msgpack, an unknown class, a wrong field count or a field whose type
    is not its annotation's (msgspec checks each against the class, in C)."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError among them
        raise MalformedFrame(f"not a message: {exc}") from None


MARKER = "::"
"""What starts a line that carries a message among a remote script's other output."""


def marker(message: Message) -> str:
    """``message`` as one line of ASCII text (``MARKER``, then its class name and fields
    as a JSON array), for a script that reports on its stdout, whatever that stdout's
    encoding. Its fields must be JSON's (no bytes). A lone surrogate in its text (an
    undecodable file name in an error) is written as its escape, so the line reads back."""
    return MARKER + json.dumps(_printable(msgspec.to_builtins(message, enc_hook=_plain)))


def _printable(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_printable(item) for item in value]
    return value


def read_marker(line: str) -> Message | None:
    """The message a ``marker`` line carries; None for a line that is not one (what else
    the host printed). ``MalformedFrame`` for a marked line that is not a message."""
    if not line.startswith(MARKER):
        return None
    try:
        return _JSON_DECODER.decode(line[len(MARKER):])
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"not a message: {exc}: {reprlib.repr(line)}") from None
