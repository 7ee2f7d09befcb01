"""B1 — one trivial round trip.

One call of a function that returns None, sent and awaited before the next: skyward
`f() >> pool` on a 4-node pool, a call of one of 4 Ray actors (round-robin), a Ray task,
a Dask `client.submit` pinned to one of 4 workers (round-robin), and
`ProcessPoolExecutor.submit`. Each engine is warmed up first; the numbers are over
single calls. Skyward's `>>` goes round-robin over the 4 node agents through each
agent's Unix-socket lane, not a Ray actor call (see docs/architecture.md). Skyward and
ProcessPoolExecutor call a function defined in the script (`__main__`), as users write
it (skyward ships it by value); skyward's second row calls the same function imported
from a module. The subjects take turns over 3 rounds, each round in fresh interpreters.
"""

from __future__ import annotations

import itertools

from benchmarks import engines, payloads
from benchmarks.common import Row, repeat
from benchmarks.isolate import Subject, alternated

GROUP = "B1"
TITLE = "B1 — one trivial round trip"
WARMUP = 30


def run(quick: bool = False) -> list[Row]:
    """Every subject, the subjects taking turns round by round."""
    rounds, calls = (2, 50) if quick else (3, 170)
    return alternated([
        Subject(GROUP, "skyward f() >> pool, f in the script", skyward_call, (calls, True)),
        Subject(GROUP, "skyward f() >> pool, f imported", skyward_call, (calls, False)),
        Subject(GROUP, "Ray actor call", ray_actor_call, (calls,)),
        Subject(GROUP, "Ray task", ray_task_call, (calls,)),
        Subject(GROUP, "Dask pinned submit", dask_call, (calls,)),
        Subject(GROUP, "ProcessPoolExecutor.submit, f in the script", process_pool_call, (calls,)),
    ], rounds)


def skyward_call(calls: int, in_script: bool) -> dict:
    import skyward as sky

    task = sky.function(payloads.in_script("noop") if in_script else payloads.noop)
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
    noop = payloads.in_script("noop")
    with engines.process_pool() as executor:
        return {"samples": repeat(lambda: executor.submit(noop).result(), calls, WARMUP)}
