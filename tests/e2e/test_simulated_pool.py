"""A pool of 100 simulated nodes through the real client, driver and relay server
(tests/simulated_cluster.py; benchmarks/bench_simulated.py measures 10 to 1,000): every
node answers an `@`, a map comes back whole and in order, a node's failure comes back
as the task's error with its node, and closing leaves no relay process behind."""

from __future__ import annotations

import psutil
import pytest
from simulated_cluster import SimulatedProvider

import skyward as sky

NODES = 100


@sky.function
def rank_of(value: int) -> int:
    return value


@sky.function
def fails() -> None:
    raise ValueError("planted")


def _double(x: int) -> int:
    return 2 * x


def test_a_hundred_simulated_nodes_answer_through_the_real_relay() -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    options = sky.Options(console=False, logging=False)
    with sky.Compute(provider=SimulatedProvider(), nodes=NODES, options=options) as pool:
        relays = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
        assert any("simulated_cluster.py" in " ".join(child.cmdline()) for child in relays)
        assert rank_of(7) @ pool == [7] * NODES
        assert pool.map(_double, range(20_000)) == [2 * x for x in range(20_000)]
        with pytest.raises(ValueError, match="planted"):
            fails() >> pool
    assert not [child for child in relays if child.is_running() and child.status() != psutil.STATUS_ZOMBIE], (
        "closing the pool ended its relay process")
