"""Large buffers backed by 2 MB pages, for payloads of megabytes that arrive whole.

A fresh buffer's first touch faults once per page; with 4 KB pages 100 MB is 25,600
faults, which took 48 ms here for a ``bytearray`` and 57-77 ms for ``bytes(buffer)``
(its copy included). Where the kernel has transparent huge pages in ``madvise`` mode (the
default of Debian and Ubuntu), asking for them makes that 13 ms and 25-33 ms. Without
them, or off CPython on Linux, both functions fall back to the plain allocation.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import sys
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
    """``bytes(buffer)`` for a C-contiguous ``buffer``, its memory asked to be backed by
    huge pages from ``HUGE_FROM`` bytes: the bytes object is made uninitialised by the C
    API (``PyBytes_FromStringAndSize(NULL, n)``, meant to be filled before anyone sees
    it), its whole 2 MB pages advised, and ``buffer`` copied in."""
    view = memoryview(buffer)
    size = view.nbytes
    if size < HUGE_FROM or _DATA_OFFSET is None or not view.c_contiguous:
        return bytes(view)
    made: bytes = _uninitialised(None, size)
    start = id(made) + _DATA_OFFSET
    first, end = -(-start // _HUGE_PAGE) * _HUGE_PAGE, (start + size) // _HUGE_PAGE * _HUGE_PAGE
    if end > first:
        _madvise(first, end - first, mmap.MADV_HUGEPAGE)  # advice only: its failure changes nothing
    memoryview((ctypes.c_char * size).from_address(start)).cast("B")[:] = view.cast("B")
    return made


def _data_offset() -> int | None:
    """Where a bytes object's data starts from its address, checked on one; None where
    that cannot be done here (not CPython, or no ``madvise`` to call)."""
    if sys.implementation.name != "cpython" or not sys.platform.startswith("linux"):
        return None
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    offset = bytes.__basicsize__ - 1  # PyBytesObject ends with its first byte of data
    probe: bytes = _uninitialised(None, 8)
    ctypes.memmove(id(probe) + offset, b"skyward!", 8)
    return offset if probe == b"skyward!" else None


try:
    _uninitialised = ctypes.pythonapi.PyBytes_FromStringAndSize
    _uninitialised.restype, _uninitialised.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_ssize_t]
    _madvise = ctypes.CDLL(None, use_errno=True).madvise
    _madvise.restype, _madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _DATA_OFFSET = _data_offset()
except (AttributeError, OSError):
    _DATA_OFFSET = None
