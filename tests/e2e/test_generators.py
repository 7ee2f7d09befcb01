"""Generator functions stream: ``for x in gen() >> pool`` yields each value on the client
as the node produces it (thread and process executors); ``gen() @ pool`` gives one stream
per node; in a group (``&``, ``gather``) and behind ``>`` a generator's place holds its
stream. Errors come after the values before them, a closed stream stops its generator on
the node, and ``pool.map`` refuses a generator naming the streaming forms."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

import skyward as sky

ROOT = Path(__file__).resolve().parents[2]
STOP_WAIT = 15.0


@sky.function
def countdown(n: int) -> Iterator[int]:
    yield from range(n, 0, -1)


@sky.function
def slow_pair() -> Iterator[float]:
    yield time.time()
    time.sleep(1.5)
    yield time.time()


@sky.function
def fails_after(n: int) -> Iterator[int]:
    yield from range(n)
    raise ValueError(f"stopped after {n}")


@sky.function
def printed_and_yielded() -> Iterator[str]:
    print("before")
    yield "value"


@sky.function
def tagged(n: int) -> Iterator[tuple[int, int]]:
    node = sky.instance_info().node
    for index in range(n):
        yield node, index


@sky.function
def fails_on(bad_node: int) -> Iterator[int]:
    yield 1
    yield 2
    if sky.instance_info().node == bad_node:
        raise ValueError(f"node {bad_node} gave up")
    yield 3


@sky.function
def endless(folder: str) -> Iterator[int]:
    """Counts forever; writes ``closed-<node>`` in ``folder`` when it is closed (whole:
    written aside and renamed, so a reader never finds it empty)."""
    count = 0
    try:
        while True:
            yield count
            count += 1
            time.sleep(0.02)
    finally:
        name = f"closed-{sky.instance_info().node}"
        Path(folder, f".{name}").write_text(str(count))
        os.replace(Path(folder, f".{name}"), Path(folder, name))


@sky.function
def add(a: int, b: int) -> int:
    return a + b


@sky.function
def later(value: int) -> int:
    time.sleep(0.5)
    return value


@sky.function
def later_failure() -> int:
    time.sleep(0.3)
    raise ValueError("stopped after 0")


@sky.function
def total(data: Iterator[int]) -> int:
    return sum(data)


@sky.function
def doubled(data: Iterator[int]) -> Iterator[int]:
    for value in data:
        yield value * 2


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A folder every node sees (SSH test hosts each have their own /tmp, not /var/tmp)."""
    folder = tempfile.mkdtemp(prefix="skyward-gen-", dir="/var/tmp")
    os.chmod(folder, 0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _wait_for_files(folder: str, count: int) -> list[str]:
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        found = sorted(name for name in os.listdir(folder) if name.startswith("closed-"))
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"only {os.listdir(folder)} in {folder} after {STOP_WAIT:g}s: a generator kept running")


def test_values_arrive_in_order(pool4: sky.Pool) -> None:
    assert list(countdown(5) >> pool4) == [5, 4, 3, 2, 1]
    assert list(countdown(0) >> pool4) == []
    assert list(countdown(2000) >> pool4) == list(range(2000, 0, -1))


def test_each_value_arrives_as_it_is_produced(pool4: sky.Pool) -> None:
    values = slow_pair() >> pool4
    first = next(values)
    seen_at = time.time()
    assert seen_at - first < 1.0  # not held back until the generator ended
    second = next(values)
    assert second - first >= 1.4
    assert list(values) == []


def test_an_error_follows_the_values_before_it(pool4: sky.Pool) -> None:
    got = []
    with pytest.raises(ValueError, match="stopped after 3"):
        for value in fails_after(3) >> pool4:
            got.append(value)  # noqa: PERF402 - the values before the error
    assert got == [0, 1, 2]


def test_broadcast_gives_one_stream_per_node(pool4: sky.Pool) -> None:
    streams = tagged(3) @ pool4
    assert len(streams) == pool4.current_nodes() == 4
    for node, stream in enumerate(streams):
        assert list(stream) == [(node, 0), (node, 1), (node, 2)]


def test_broadcast_streams_run_at_once(pool4: sky.Pool) -> None:
    started = time.time()
    streams = slow_pair() @ pool4
    firsts = [next(stream) for stream in streams]  # every node's first value, before any second
    assert max(firsts) - started < 1.4
    for stream in streams:
        assert next(stream) >= started + 1.4
        assert list(stream) == []


def test_one_nodes_error_is_raised_by_its_own_stream(pool4: sky.Pool) -> None:
    streams = fails_on(2) @ pool4
    for node, stream in enumerate(streams):
        if node != 2:
            assert list(stream) == [1, 2, 3]
    got = []
    with pytest.raises(ValueError, match="node 2 gave up") as raised:
        for value in streams[2]:
            got.append(value)  # noqa: PERF402 - the values before the error
    assert got == [1, 2]
    assert any("on node 2" in note for note in raised.value.__notes__)


def test_a_group_holds_the_stream_in_the_generators_place(pool4: sky.Pool) -> None:
    stream, result = (countdown(3) & add(1, 2)) >> pool4
    assert result == 3
    assert list(stream) == [3, 2, 1]
    first, second = sky.gather(countdown(2), countdown(3)) >> pool4
    assert (list(second), list(first)) == ([3, 2, 1], [2, 1])


def test_gather_stream_yields_the_stream_when_it_starts(pool4: sky.Pool) -> None:
    ordered = list(sky.gather(add(1, 1), countdown(2), stream=True) >> pool4)
    assert ordered[0] == 2
    assert list(ordered[1]) == [2, 1]
    stream, result = sky.gather(later(4), fails_after(1), stream=True, ordered=False) >> pool4
    assert result == 4  # the stream came first: it is ready as soon as it starts
    with pytest.raises(ValueError, match="stopped after 1"):
        list(stream)


def test_future_holds_the_stream(pool4: sky.Pool) -> None:
    future = countdown(3) > pool4
    assert isinstance(future, Future)
    assert list(future.result(timeout=5)) == [3, 2, 1]


def test_breaking_out_stops_the_generator_on_its_node(pool4: sky.Pool, shared_dir: str) -> None:
    for value in endless(shared_dir) >> pool4:
        if value == 3:
            break
    [closed] = _wait_for_files(shared_dir, 1)
    assert int(Path(shared_dir, closed).read_text()) < 200  # stopped soon after, not at the end


def test_closing_broadcast_streams_stops_every_node(pool4: sky.Pool, shared_dir: str) -> None:
    streams = endless(shared_dir) @ pool4
    assert [next(stream) for stream in streams] == [0, 0, 0, 0]
    for stream in streams:
        stream.close()
    assert _wait_for_files(shared_dir, 4) == [f"closed-{node}" for node in range(4)]
    with pytest.raises(StopIteration):
        next(streams[0])


def test_dropping_an_unread_stream_stops_it(pool4: sky.Pool, shared_dir: str) -> None:
    stream, _ = (endless(shared_dir) & add(1, 1)) >> pool4
    del stream  # never read: the node has not told which node it is yet
    _wait_for_files(shared_dir, 1)
    assert list(countdown(2) >> pool4) == [2, 1]  # the pool goes on


def test_a_failed_group_stops_the_stream_it_never_handed_out(pool4: sky.Pool, shared_dir: str) -> None:
    with pytest.raises(ValueError, match="stopped after 0"):
        (endless(shared_dir) & add(1, 1) & countdown(1) & later_failure()) >> pool4
    _wait_for_files(shared_dir, 1)
    second = os.path.join(shared_dir, "second")
    os.mkdir(second, 0o777)
    for result in sky.gather(add(1, 1), endless(second), stream=True) >> pool4:
        assert result == 2
        break  # the stream, not handed out yet, is stopped with the group
    _wait_for_files(second, 1)


def test_input_streaming_of_iterator_parameters(pool4: sky.Pool) -> None:
    assert total(iter(range(100))) >> pool4 == 4950
    assert list(doubled(iter(range(5))) >> pool4) == [0, 2, 4, 6, 8]


def test_map_refuses_a_generator_naming_the_streaming_forms(pool4: sky.Pool) -> None:
    with pytest.raises(TypeError, match=r"countdown is a generator function and map needs a plain one.*>> pool"):
        pool4.map(countdown, [1, 2])


def test_process_executor_streams_too(pool2_process: sky.Pool, shared_dir: str) -> None:
    assert list(countdown(4) >> pool2_process) == [4, 3, 2, 1]
    assert list(printed_and_yielded() >> pool2_process) == ["value"]
    assert [list(stream) for stream in countdown(2) @ pool2_process] == [[2, 1], [2, 1]]
    for stream in endless(shared_dir) @ pool2_process:
        next(stream)
        stream.close()
    assert _wait_for_files(shared_dir, 2) == ["closed-0", "closed-1"]


def test_generator_broadcast_example(tmp_path: Path) -> None:
    """examples/generator_broadcast.py, written as the original's streaming-broadcast
    guide is (only the provider line differs), runs as it is."""
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "generator_broadcast.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for node in range(4):
        assert f"node {node}: [0, 1, 2]" in done.stdout
    assert "counter(3) & add(1, 2) -> [0, 1, 2] 3" in done.stdout


@pytest.fixture(scope="module")
def pool2_process() -> Iterator[sky.Pool]:
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=2, options=options) as pool:
        yield pool
