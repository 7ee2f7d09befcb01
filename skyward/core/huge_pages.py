"""Large buffers backed by 2 MB pages, for payloads of megabytes that arrive whole.

A fresh buffer's first touch faults once per page; with 4 KB pages 100 MB is 25,600
faults, which took 48 ms here for a ``bytearray`` and 57-77 ms for ``bytes(buffer)``
(its copy included). Where the kernel has transparent huge pages in ``madvise`` mode (the
default of Debian and Ubuntu), asking for them makes that 13 ms and 25-37 ms. Without
them, or off CPython on Linux, every function here falls back to the plain allocation.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

HUGE_FROM = 2 << 20
"""Buffers of this many bytes or more are asked to be backed by huge pages."""
_HUGE_PAGE = 2 << 20


def zeroed(size: int) -> bytearray | mmap.mmap:
    """A writable, zeroed buffer of ``size`` bytes: from ``HUGE_FROM`` bytes an anonymous
    map asked to be backed by huge pages (unmapped when its last reference goes)."""
    if size < HUGE_FROM:
        return bytearray(size)
    buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(AttributeError, OSError):  # no transparent huge pages: 4 KB pages then
        buffer.madvise(mmap.MADV_HUGEPAGE)
    return buffer


def bytes_of(buffer: ReadableBuffer) -> bytes:
    """``bytes(buffer)``, its memory asked to be backed by huge pages from ``HUGE_FROM``
    bytes (``to_fill``); ``buffer`` itself when it is a ``bytes`` already (a lane read it
    into one: ``engine.transports.lane``), which nothing can change."""
    if type(buffer) is bytes:
        return buffer
    view = memoryview(buffer)
    filled = to_fill(view.nbytes) if view.c_contiguous else None
    if filled is None:
        return bytes(view)
    made, filling = filled
    filling[:] = view.cast("B")
    return made


def to_fill(size: int) -> tuple[bytes, memoryview] | None:
    """A new ``bytes`` object of ``size`` bytes, uninitialised, and a writable view of its
    memory, whose whole 2 MB pages are asked to be huge: to be filled before the object
    is used (hashed, compared, shared), as the C API makes it for
    (``PyBytes_FromStringAndSize(NULL, n)``). None below ``HUGE_FROM`` bytes, or where
    that cannot be done here (not CPython on Linux)."""
    api = _c_api() if size >= HUGE_FROM else None
    if api is None:
        return None
    uninitialised, madvise, offset = api
    made = uninitialised(None, size)
    start = id(made) + offset
    first, end = -(-start // _HUGE_PAGE) * _HUGE_PAGE, (start + size) // _HUGE_PAGE * _HUGE_PAGE
    if end > first:
        madvise(first, end - first, mmap.MADV_HUGEPAGE)  # advice only: its failure changes nothing
    import ctypes

    return made, memoryview((ctypes.c_char * size).from_address(start)).cast("B")


@functools.cache
def _c_api() -> tuple[Callable[[None, int], bytes], Callable[[int, int, int], int], int] | None:
    """``PyBytes_FromStringAndSize``, ``madvise`` and where a bytes object's data starts
    from its address (checked on one), loaded on first use; None where that cannot be
    done here."""
    if sys.implementation.name != "cpython" or not sys.platform.startswith("linux"):
        return None
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    import ctypes  # 1.5 ms: only where a large payload comes

    try:
        uninitialised = ctypes.pythonapi.PyBytes_FromStringAndSize
        uninitialised.restype, uninitialised.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_ssize_t]
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.restype, madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (AttributeError, OSError):
        return None
    offset = bytes.__basicsize__ - 1  # PyBytesObject ends with its first byte of data
    probe = uninitialised(None, 8)
    ctypes.memmove(id(probe) + offset, b"skyward!", 8)
    return (uninitialised, madvise, offset) if probe == b"skyward!" else None
