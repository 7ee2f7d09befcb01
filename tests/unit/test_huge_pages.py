"""Large buffers backed by huge pages (core/huge_pages.py): the relay's receive buffers
and the ``bytes`` a node makes of a large argument equal what plain allocation gives."""

from __future__ import annotations

import mmap
import os

import pytest

from skyward.core import huge_pages


SIZES = [0, 5, huge_pages.HUGE_FROM - 1, huge_pages.HUGE_FROM, 3 * huge_pages.HUGE_FROM + 12345]


@pytest.mark.parametrize("size", SIZES)
def test_bytes_of_equals_bytes_for_every_kind_of_buffer(size: int) -> None:
    data = os.urandom(size)
    mapped = huge_pages.zeroed(size)
    mapped[:] = data
    for buffer in (data, bytearray(data), memoryview(data), mapped):
        made = huge_pages.bytes_of(buffer)
        assert type(made) is bytes and made == data and hash(made) == hash(data)


def test_bytes_of_a_bytes_is_that_bytes_and_of_anything_else_a_copy() -> None:
    """A lane reads a large argument into a ``bytes`` of its own: the node hands that on
    rather than copying it again; any other buffer (Ray's store, a writable one) is copied."""
    data = os.urandom(huge_pages.HUGE_FROM)
    assert huge_pages.bytes_of(data) is data
    for buffer in (bytearray(data), memoryview(data)):
        assert huge_pages.bytes_of(buffer) is not data


def test_bytes_of_a_strided_view_copies_its_items() -> None:
    data = os.urandom(2 * huge_pages.HUGE_FROM)
    assert huge_pages.bytes_of(memoryview(data)[::2]) == data[::2]


def test_the_fast_path_is_taken_on_linux_cpython() -> None:
    """The check of a bytes object's layout passed here, so the tests above exercised
    the bytes made uninitialised and filled."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        pytest.skip("no madvise(MADV_HUGEPAGE) here")
    assert huge_pages._c_api() is not None
    assert huge_pages.to_fill(huge_pages.HUGE_FROM - 1) is None
    filled = huge_pages.to_fill(huge_pages.HUGE_FROM)
    assert filled is not None
    made, view = filled
    view[:] = b"\x07" * huge_pages.HUGE_FROM
    assert type(made) is bytes and made == b"\x07" * huge_pages.HUGE_FROM


def test_zeroed_is_writable_zeroes_of_the_size_asked() -> None:
    for size in (0, 10, huge_pages.HUGE_FROM, huge_pages.HUGE_FROM + 1):
        buffer = huge_pages.zeroed(size)
        assert len(buffer) == size and bytes(buffer) == bytes(size)
        assert isinstance(buffer, mmap.mmap) == (size >= huge_pages.HUGE_FROM)
