"""A large ``bytes`` argument of a task travels out of band (engine/wire.py): the client
does not copy it into the pickle, and the node gets ``bytes`` equal to it."""

from __future__ import annotations

import os

from skyward.engine.wire import OUT_OF_BAND_BYTES, ByValueEncoder, TaskRequest, decode, encode


def test_a_large_bytes_argument_travels_out_of_band_and_arrives_as_bytes() -> None:
    large, small = os.urandom(OUT_OF_BAND_BYTES), os.urandom(OUT_OF_BAND_BYTES - 1)
    nested = [os.urandom(OUT_OF_BAND_BYTES)]
    request = TaskRequest("t1", "f", len, (large, small, nested), {"named": large})
    for encoder in (encode, ByValueEncoder()):
        payload = encoder(request)
        assert isinstance(payload, tuple)
        header, buffers = payload
        assert len(header) < 2 * OUT_OF_BAND_BYTES + 4096  # the small one and the nested one, in band
        assert sorted(memoryview(b).nbytes for b in buffers) == [OUT_OF_BAND_BYTES] * 2
        arrived = decode((header, [bytes(memoryview(b)) for b in buffers]))
        assert arrived.args == (large, small, nested) and arrived.kwargs == {"named": large}
        assert type(arrived.args[0]) is bytes and type(arrived.kwargs["named"]) is bytes
    assert request.args[0] is large  # the request itself is left as it was
    assert encode(TaskRequest("t2", "f", len, (small,))) == encode(TaskRequest("t2", "f", len, (small,)))
    assert isinstance(encode(TaskRequest("t2", "f", len, (small,))), bytes)  # nothing large: in band
