"""A payload stored once for every node of a broadcast (``RayTransport.share``): a large
pickle goes into Ray's object store out of band, so each node's agent unpickles it where
it lies instead of copying it out of the store first."""

from __future__ import annotations

import asyncio
import os

import ray

import skyward as sky
from skyward.engine import wire
from skyward.engine.transports.ray_actors import RayTransport

OPTIONS = sky.Options(console=False, logging=False)


@sky.function
def size(data: bytes) -> int:
    return len(data)


def test_a_large_shared_pickle_is_read_in_place_and_a_small_one_as_bytes() -> None:
    large, small = os.urandom(3 * wire.OUT_OF_BAND_BYTES), os.urandom(1000)
    with sky.Compute(nodes=2, options=OPTIONS) as pool:  # this process is the pool's Ray driver
        transport = RayTransport([])
        stored = [ray.get(asyncio.run(transport.share(wire.encode(value))).handle) for value in (large, small)]
        assert not isinstance(stored[0], bytes)  # a view of the store's memory, not a copy
        assert wire.decode(stored[0]) == large
        assert isinstance(stored[1], bytes) and wire.decode(stored[1]) == small
        assert (size(large) @ pool) == [len(large)] * 2
