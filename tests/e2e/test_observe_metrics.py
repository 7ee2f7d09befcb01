"""Metric events from real node agents: their interval, custom commands, errors, off."""

from __future__ import annotations

import statistics
import time

import pytest

import skyward as sky

pytestmark = pytest.mark.usefixtures("warm_ray")  # keeps Ray warm: each pool here starts in ~1 s

QUIET = sky.Options(console=False, logging=False)
WINDOW = 4.0


def collect(
    image: sky.Image, nodes: int = 2, settled: bool = True, window: float = WINDOW
) -> list[tuple[float, sky.Event]]:
    """(arrival time, event) for metrics and errors until ``window`` seconds after the pool
    opened; ``settled`` drops what arrived in its first half second (sampled during start
    and delivered in one batch)."""
    arrived: list[tuple[float, sky.Event]] = []
    pool = sky.Compute(nodes=nodes, image=image, options=QUIET)
    pool.on(sky.Metric, lambda e: arrived.append((time.monotonic(), e)))
    pool.on(sky.Error, lambda e: arrived.append((time.monotonic(), e)))
    with pool:
        opened = time.monotonic()
        time.sleep(window)
    return [(t, e) for t, e in arrived if not settled or t > opened + 0.5]


def series(arrived: list[tuple[float, sky.Event]], node: int, name: str) -> list[tuple[float, sky.Metric]]:
    return [(t, e) for t, e in arrived if isinstance(e, sky.Metric) and e.node == node and e.name == name]


def test_metrics_arrive_at_their_interval_on_average_and_typically() -> None:
    image = sky.Image(metrics=[sky.metrics.CPU(interval=0.5), sky.metrics.Memory(interval=1.0)])
    arrived = collect(image)
    for node in (0, 1):
        for name, interval in (("cpu", 0.5), ("memory", 1.0)):
            points = series(arrived, node, name)
            assert len(points) >= int((WINDOW - 0.5) / interval) - 1, (node, name, len(points))
            sampled = [e.timestamp for _, e in points]
            received = [t for t, _ in points]
            for times in (sampled, received):
                # a node's sampler keeps its rate: a wake-up the OS delays is followed by a
                # shorter gap, so the claim is on the typical and the mean gap (a batch
                # delivery would bring the median gap near 0 and fail it)
                gaps = [b - a for a, b in zip(times, times[1:])]
                assert 0.5 * interval <= statistics.median(gaps) <= 1.5 * interval, (name, gaps)
                assert 0.75 * interval <= statistics.fmean(gaps) <= 1.25 * interval, (name, gaps)
            assert all(0 <= e.value <= 100 and e.unit == "%" for _, e in points)


def test_custom_metrics_and_a_bad_collector_reported_once_per_node() -> None:
    image = sky.Image(metrics=[
        sky.metrics.Custom("answer", "echo 42", interval=0.5),
        sky.metrics.Disk("/no/such/mount"),
        sky.metrics.MemoryTotal(interval=1.0),
    ])
    arrived = collect(image, settled=False, window=2.0)
    answers = series(arrived, 0, "answer") + series(arrived, 1, "answer")
    assert answers and {e.value for _, e in answers} == {42.0}
    totals = series(arrived, 0, "memory_total")
    assert totals and totals[0][1].unit == "MB" and totals[0][1].value > 100
    errors = [e for _, e in arrived if isinstance(e, sky.Error)]
    assert sorted(e.node for e in errors) == [0, 1]
    assert all("/no/such/mount" in e.message and "does not exist" in e.message for e in errors)


def test_image_metrics_none_turns_sampling_off() -> None:
    assert collect(sky.Image(metrics=None), nodes=1, settled=False, window=1.5) == []


def test_nodes_sample_only_while_someone_listens_for_metrics(tmp_path) -> None:
    reads = tmp_path / "reads"
    image = sky.Image(metrics=[sky.metrics.Custom("reads", f"echo x >> {reads}; echo 1", interval=0.2)])

    def count() -> int:
        return len(reads.read_text().splitlines()) if reads.exists() else 0

    with sky.Compute(nodes=1, image=image, options=QUIET) as pool:
        time.sleep(1.5)  # the node starts sampling; the client tells it nobody listens
        paused = count()
        time.sleep(2.0)
        assert count() == paused, "the node kept sampling with no listener"
        arrived: list[sky.Metric] = []
        unsubscribe = pool.on(sky.Metric, arrived.append)
        deadline = time.monotonic() + 5.0
        while len(arrived) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(arrived) >= 3 and count() > paused
        unsubscribe()
        time.sleep(1.5)
        stopped = count()
        time.sleep(2.0)
        assert count() == stopped
