"""A remote pool's request sends its large ``bytes`` arguments out of band (engine/wire.py,
``ByValueEncoder``): the client does not copy them into the pickle, an object passed
twice travels once, and the node gets ``bytes`` equal to each."""

from __future__ import annotations

import os

from skyward.engine.wire import OUT_OF_BAND_BYTES, ByValueEncoder, TaskRequest, decode, encode


def test_a_large_bytes_argument_travels_out_of_band_once_and_arrives_as_bytes() -> None:
    large, small = os.urandom(OUT_OF_BAND_BYTES), os.urandom(OUT_OF_BAND_BYTES - 1)
    nested = [os.urandom(OUT_OF_BAND_BYTES)]
    request = TaskRequest("t1", "f", len, (large, small, nested, large), {"named": large})
    payload = ByValueEncoder()(request)
    assert isinstance(payload, tuple)
    header, buffers = payload
    assert len(header) < 2 * OUT_OF_BAND_BYTES + 4096  # the small one and the nested one, in band
    assert [memoryview(b).nbytes for b in buffers] == [OUT_OF_BAND_BYTES]  # the large one, once
    arrived = decode((header, [bytes(memoryview(b)) for b in buffers]))
    assert arrived.args == (large, small, nested, large) and arrived.kwargs == {"named": large}
    assert type(arrived.args[0]) is bytes and type(arrived.kwargs["named"]) is bytes
    assert decode((header, [memoryview(b).toreadonly() for b in buffers])).args[0] == large  # as read from Ray
    assert request.args[0] is large  # the request itself is left as it was
    assert isinstance(ByValueEncoder()(TaskRequest("t2", "f", len, (small,))), bytes)  # nothing large: in band


def test_a_local_pools_request_keeps_its_bytes_in_band() -> None:
    """A local pool's agents read a request over a Unix-socket lane, which carries a
    pickle with no out-of-band buffers."""
    assert isinstance(encode(TaskRequest("t1", "f", len, (os.urandom(OUT_OF_BAND_BYTES),))), bytes)
