"""B3 — a 100 MB numpy array broadcast to 4 workers.

One function call per worker, each taking the same 100 MB float64 array and returning
its size and last element (so the data must arrive, but is not copied again there):
skyward `f(array) @ pool`, Ray `ray.put` + 4 tasks taking the reference, Dask
`scatter(broadcast=True)` + 4 submits pinned one per worker, and ProcessPoolExecutor with
4 submits (the array pickled into each). Skyward and ProcessPoolExecutor call a function
defined in the script (`__main__`), as users write it (skyward ships it by value). Each
engine broadcasts twice untimed first; each run is timed from the call to the last
result. After the timed runs, skyward broadcasts the array once more inside a wrapper
that counts how often the client serializes it. The subjects take turns over 2 rounds,
each round in fresh interpreters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row, repeat
from benchmarks.isolate import Subject, alternated

GROUP = "B3"
TITLE = "B3 — 100 MB numpy argument broadcast to 4 workers"
ELEMENTS = 12_500_000  # float64: 100 MB
WARMUP = 2


def run(quick: bool = False) -> list[Row]:
    """Every subject, the subjects taking turns round by round."""
    rounds, runs = (1, 3) if quick else (2, 5)
    return alternated([
        Subject(GROUP, "skyward f(array) @ pool", skyward_broadcast, (runs,)),
        Subject(GROUP, "Ray put + 4 tasks", ray_broadcast, (runs,)),
        Subject(GROUP, "Dask scatter + 4 submits", dask_broadcast, (runs,)),
        Subject(GROUP, "ProcessPoolExecutor 4 submits", process_pool_broadcast, (runs,)),
    ], rounds)


def _array() -> Any:
    import numpy as np

    return np.arange(ELEMENTS, dtype=np.float64)


def _checked(broadcast: Callable[[Any], list[int]], runs: int) -> dict:
    """Time ``broadcast(array)`` ``runs`` times after ``WARMUP`` more, checking every worker
    answered with the array's size and last element."""
    array = _array()
    expected = [payloads.probe(array)] * engines.WORKERS
    answers: list[list[int]] = []
    samples = repeat(lambda: answers.append(broadcast(array)), runs, WARMUP)
    correct = all(answer == expected for answer in answers)
    return {"samples": samples, "note": "" if correct else "wrong results", "facts": {"correct": correct}}


def skyward_broadcast(runs: int) -> dict:
    import skyward as sky

    probe = sky.function(payloads.in_script("probe"))
    probe_counted = sky.function(payloads.in_script("probe_counted"))
    with engines.skyward_pool() as pool:
        outcome = _checked(lambda array: probe(array) @ pool, runs)
        payloads.Counted.pickled = 0
        probe_counted(payloads.Counted(_array())) @ pool
    serializations = payloads.Counted.pickled
    outcome["facts"]["serializations"] = serializations
    outcome["note"] = f"argument serialized {serializations}x per broadcast {outcome['note']}".strip()
    return outcome


def ray_broadcast(runs: int) -> dict:
    import ray

    with engines.ray_instance():
        task = ray.remote(payloads.probe)

        def broadcast(array: Any) -> list[int]:
            ref = ray.put(array)
            return ray.get([task.remote(ref) for _ in range(engines.WORKERS)])

        return _checked(broadcast, runs)


def dask_broadcast(runs: int) -> dict:
    with engines.dask_client() as client:
        workers = engines.dask_workers(client)

        def broadcast(array: Any) -> list[int]:
            [shared] = client.scatter([array], broadcast=True, hash=False)
            futures = [client.submit(payloads.probe, shared, workers=[w], pure=False) for w in workers]
            try:
                return client.gather(futures)
            finally:
                client.cancel([shared, *futures])

        return _checked(broadcast, runs)


def process_pool_broadcast(runs: int) -> dict:
    probe = payloads.in_script("probe")
    with engines.process_pool() as executor:

        def broadcast(array: Any) -> list[int]:
            futures = [executor.submit(probe, array) for _ in range(engines.WORKERS)]
            return [future.result() for future in futures]

        return _checked(broadcast, runs)
