"""B1 — one trivial round trip.

One call of a function that returns None, sent and awaited before the next: skyward
`f() >> pool` on a 4-node pool, a call of one of 4 Ray actors (round-robin), a Ray task,
a Dask `client.submit` pinned to one of 4 workers (round-robin), and
`ProcessPoolExecutor.submit`. Each engine is warmed up first; the numbers are over
single calls. Skyward's `>>` goes round-robin over the 4 node agents through each
agent's Unix-socket lane, not a Ray actor call (see docs/architecture.md).
"""

from __future__ import annotations

import itertools

from benchmarks import engines, payloads
from benchmarks.common import Row, repeat
from benchmarks.isolate import measured

GROUP = "B1"
TITLE = "B1 — one trivial round trip"
WARMUP = 30


def run(quick: bool = False) -> list[Row]:
    """Every subject, each in a fresh interpreter."""
    calls = 100 if quick else 500
    return [
        measured(GROUP, "skyward f() >> pool", skyward_call, calls),
        measured(GROUP, "Ray actor call", ray_actor_call, calls),
        measured(GROUP, "Ray task", ray_task_call, calls),
        measured(GROUP, "Dask pinned submit", dask_call, calls),
        measured(GROUP, "ProcessPoolExecutor.submit", process_pool_call, calls),
    ]


def skyward_call(calls: int) -> dict:
    import skyward as sky

    task = sky.function(payloads.noop)
    with engines.skyward_pool() as pool:
        return {"samples": repeat(lambda: task() >> pool, calls, WARMUP)}


def ray_actor_call(calls: int) -> dict:
    import ray

    class Actor:
        def noop(self) -> None:
            return None

    with engines.ray_instance():
        actors = itertools.cycle([ray.remote(Actor).remote() for _ in range(engines.WORKERS)])

        def call() -> None:
            ray.get(next(actors).noop.remote())

        return {"samples": repeat(call, calls, WARMUP)}


def ray_task_call(calls: int) -> dict:
    import ray

    with engines.ray_instance():
        task = ray.remote(payloads.noop)
        return {"samples": repeat(lambda: ray.get(task.remote()), calls, WARMUP)}


def dask_call(calls: int) -> dict:
    with engines.dask_client() as client:
        workers = itertools.cycle(engines.dask_workers(client))

        def call() -> None:
            client.submit(payloads.noop, pure=False, workers=[next(workers)]).result()

        return {"samples": repeat(call, calls, WARMUP)}


def process_pool_call(calls: int) -> dict:
    with engines.process_pool() as executor:
        return {"samples": repeat(lambda: executor.submit(payloads.noop).result(), calls, WARMUP)}
