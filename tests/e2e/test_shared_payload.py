"""A payload stored once for every node of a broadcast (``RayTransport.share``): a large
pickle goes into Ray's object store out of band, so each node's agent unpickles it where
it lies instead of copying it out of the store first."""

from __future__ import annotations

import asyncio
import os

import pytest
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


def test_a_relay_sends_a_held_payload_over_the_lanes_and_through_ray_where_there_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head relay's transport (``share_by_lanes``) holds a shared payload and sends it
    to each node over its lane, the pickle and its buffers as they are: it never enters
    Ray's object store while every node has a lane; a node without one gets it through
    Ray, put there once however many such nodes there are."""
    data = os.urandom(5 * wire.OUT_OF_BAND_BYTES)
    request = wire.encode(wire.TaskRequest("held", "len", len, (data,)))
    assert isinstance(request, tuple)  # the argument out of band, as a client sends it
    puts: list[object] = []
    put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(value) or put(value, **kw))
    with sky.Compute(nodes=3, options=OPTIONS) as pool:  # this process is the pool's Ray driver
        local = pool._open.driver._transport  # type: ignore[union-attr]  # the agents and their lanes
        agents = [local.agents[node] for node in range(3)]

        async def sent(lanes: list[str]) -> list[object]:
            relay = RayTransport(agents, lanes, share_by_lanes=True)
            try:
                shared = await relay.share(request)
                replies = await asyncio.gather(*(relay.call(node, shared, 30) for node in range(3)))
                return [wire.decode(reply)[:2] for reply in replies]
            finally:
                relay.close()

        every_lane = [local._lanes[node].address for node in range(3)]
        assert asyncio.run(sent(every_lane)) == [(True, len(data))] * 3
        assert puts == []
        assert asyncio.run(sent([every_lane[0], "", ""])) == [(True, len(data))] * 3
        assert len(puts) == 1
