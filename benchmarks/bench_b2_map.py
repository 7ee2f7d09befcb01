"""B2 — map 10,000 trivial items.

`[identity(x) for x in range(10_000)]` across 4 workers, results collected in input
order: skyward `pool.map` (chunking is its own choice; afterwards the same map once
with `stream=True`, checking the streamed results), one Ray task per item and Ray tasks
of 1,000 items each (the batching Ray's docs advise for tiny tasks), Dask `client.map` +
`gather` of one task per item and of tasks of 1,000 items each (the batching Dask's
best practices advise), `ProcessPoolExecutor.map` with chunksize 1, 10, 100 and 1,000
(its docs leave the choice to the user), and joblib `Parallel(n_jobs=4)` (loky, its
automatic batching). The fastest peer row, whatever its setting, is the one to beat.
Skyward and ProcessPoolExecutor map a function defined in the script (`__main__`), as
users write it; skyward's second row maps the same function imported from a module.
Each engine is warmed up with one small map first; each run is timed from the first
submit to the last result. The subjects take turns over 2 rounds, each round in fresh
interpreters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row, repeat
from benchmarks.isolate import Subject, alternated

GROUP = "B2"
TITLE = "B2 — map 10,000 trivial items"
ITEMS = 10_000
QUICK_ITEMS = 2_000
CHUNKSIZES = (1, 10, 100, 1_000)
"""ProcessPoolExecutor's chunk sizes tried (its docs leave the choice to the user)."""
BATCH = 1_000
"""Items per task in the batched Ray and Dask rows."""


def run(quick: bool = False) -> list[Row]:
    """Every subject, the subjects taking turns round by round."""
    fast, slow, count = (2, 1, QUICK_ITEMS) if quick else (12, 1, ITEMS)
    return alternated([
        Subject(GROUP, "skyward pool.map, f in the script", skyward_map, (count, fast, True)),
        Subject(GROUP, "skyward pool.map, f imported", skyward_map, (count, fast, False)),
        Subject(GROUP, "Ray tasks", ray_map, (count, slow)),
        Subject(GROUP, f"Ray tasks of {BATCH:,} items", ray_batched_map, (count, fast)),
        Subject(GROUP, "Dask client.map", dask_map, (count, slow)),
        Subject(GROUP, f"Dask tasks of {BATCH:,} items", dask_batched_map, (count, fast)),
        *(
            Subject(GROUP, f"ProcessPoolExecutor.map chunksize={size}", process_pool_map, (count, fast, size))
            for size in CHUNKSIZES
        ),
        Subject(GROUP, "joblib Parallel (loky)", joblib_map, (count, fast)),
    ], rounds=2)


def _checked(map_items: Callable[[list[int]], list[Any]], count: int, runs: int) -> dict:
    """Time ``map_items`` over ``count`` items ``runs`` times (after a small warm-up map)
    and check the results came back complete and in order."""
    items = list(range(count))
    map_items(items[:100])
    results: list[list[Any]] = []
    samples = repeat(lambda: results.append(map_items(items)), runs)
    in_order = all(result == items for result in results)
    note = "" if count == ITEMS else f"{count:,} items"
    if not in_order:
        note = f"{note} results NOT in input order".strip()
    return {"samples": samples, "note": note, "facts": {"in_order": in_order, "items": count}}


def _in_batches(map_batches: Callable[[list[list[int]]], list[list[Any]]]) -> Callable[[list[int]], list[Any]]:
    """A map over items made of ``map_batches``, a map over batches of ``BATCH`` items:
    its results flattened, in input order."""
    def map_items(items: list[int]) -> list[Any]:
        parts = map_batches([items[i:i + BATCH] for i in range(0, len(items), BATCH)])
        return [value for part in parts for value in part]

    return map_items


def skyward_map(count: int, runs: int, in_script: bool) -> dict:
    identity = payloads.in_script("identity") if in_script else payloads.identity
    with engines.skyward_pool() as pool:
        outcome = _checked(lambda items: pool.map(identity, items), count, runs)
        streamed = list(pool.map(identity, range(count), stream=True))
        outcome["facts"]["streaming"] = streamed == list(range(count))
        return outcome


def ray_map(count: int, runs: int) -> dict:
    import ray

    with engines.ray_instance():
        task = ray.remote(payloads.identity)
        return _checked(lambda items: ray.get([task.remote(x) for x in items]), count, runs)


def ray_batched_map(count: int, runs: int) -> dict:
    import ray

    with engines.ray_instance():
        task = ray.remote(payloads.identities)
        return _checked(_in_batches(lambda batches: ray.get([task.remote(b) for b in batches])), count, runs)


def dask_map(count: int, runs: int) -> dict:
    with engines.dask_client() as client:
        return _checked(
            lambda items: client.gather(client.map(payloads.identity, items, pure=False)), count, runs
        )


def dask_batched_map(count: int, runs: int) -> dict:
    with engines.dask_client() as client:
        return _checked(
            _in_batches(lambda batches: client.gather(client.map(payloads.identities, batches, pure=False))),
            count, runs,
        )


def process_pool_map(count: int, runs: int, chunksize: int) -> dict:
    identity = payloads.in_script("identity")
    with engines.process_pool() as executor:
        return _checked(lambda items: list(executor.map(identity, items, chunksize=chunksize)), count, runs)


def joblib_map(count: int, runs: int) -> dict:
    from joblib import Parallel, delayed

    with Parallel(n_jobs=engines.WORKERS, backend="loky") as parallel:
        return _checked(lambda items: parallel(delayed(payloads.identity)(x) for x in items), count, runs)
