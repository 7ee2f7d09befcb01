"""Which shard owns what: a stable hash of a key (the same in every process,
unlike the salted ``hash()``), so a dict key always lives on the same shard."""

from __future__ import annotations

import pickle
import zlib

_STR_SEED = zlib.crc32(b"s")


def stable_bytes(key: object) -> bytes:
    """Bytes naming ``key`` identically in every process.

    Keys equal in Python map to the same bytes for bool/int/float (``1 == 1.0 == True``),
    str, bytes, None and tuples/frozensets of those; any other key is pickled.
    """
    if key is None:
        return b"N"
    if isinstance(key, bool):
        key = int(key)
    elif isinstance(key, float) and key.is_integer():
        key = int(key)
    if isinstance(key, int):
        return b"i" + str(key).encode()
    if isinstance(key, float):
        return b"f" + key.hex().encode()
    if isinstance(key, str):
        return b"s" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, bytes):
        return b"b" + key
    if isinstance(key, tuple):
        return b"t" + b"".join(_framed(stable_bytes(item)) for item in key)
    if isinstance(key, frozenset):
        return b"z" + b"".join(_framed(part) for part in sorted(stable_bytes(item) for item in key))
    return b"p" + pickle.dumps(key, protocol=5)


def shard_of(key: object, hosts: int) -> int:
    """The host index owning dict key ``key``."""
    if type(key) is str:
        return zlib.crc32(key.encode("utf-8", "surrogatepass"), _STR_SEED) % hosts
    return zlib.crc32(stable_bytes(key)) % hosts


def home_of(kind: str, name: str, hosts: int) -> int:
    """The host index owning a whole (non-sharded) collection."""
    return zlib.crc32(f"{kind}\0{name}".encode()) % hosts


def _framed(part: bytes) -> bytes:
    return len(part).to_bytes(4, "big") + part
