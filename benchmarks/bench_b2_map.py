"""B2 — map 10,000 trivial items.

`[identity(x) for x in range(10_000)]` across 4 workers, results collected in input
order: skyward `pool.map` (chunking is its own choice; afterwards the same map once
with `stream=True`, checking the streamed results), one Ray task per item, Dask
`client.map` + `gather`, `ProcessPoolExecutor.map` with chunksize 1 and 100, and joblib
`Parallel(n_jobs=4)` (loky, its automatic batching). Each engine is warmed up with one
small map first; each run is timed from the first submit to the last result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row, repeat
from benchmarks.isolate import measured

GROUP = "B2"
TITLE = "B2 — map 10,000 trivial items"
ITEMS = 10_000
QUICK_ITEMS = 2_000


def run(quick: bool = False) -> list[Row]:
    """Every subject, each in a fresh interpreter."""
    fast, slow, count = (3, 1, QUICK_ITEMS) if quick else (7, 2, ITEMS)
    return [
        measured(GROUP, "skyward pool.map", skyward_map, count, fast),
        measured(GROUP, "Ray tasks", ray_map, count, slow),
        measured(GROUP, "Dask client.map", dask_map, count, slow),
        measured(GROUP, "ProcessPoolExecutor.map chunksize=1", process_pool_map, count, fast, 1),
        measured(GROUP, "ProcessPoolExecutor.map chunksize=100", process_pool_map, count, fast, 100),
        measured(GROUP, "joblib Parallel (loky)", joblib_map, count, fast),
    ]


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


def skyward_map(count: int, runs: int) -> dict:
    with engines.skyward_pool() as pool:
        outcome = _checked(lambda items: pool.map(payloads.identity, items), count, runs)
        streamed = list(pool.map(payloads.identity, range(count), stream=True))
        outcome["facts"]["streaming"] = streamed == list(range(count))
        return outcome


def ray_map(count: int, runs: int) -> dict:
    import ray

    with engines.ray_instance():
        task = ray.remote(payloads.identity)
        return _checked(lambda items: ray.get([task.remote(x) for x in items]), count, runs)


def dask_map(count: int, runs: int) -> dict:
    with engines.dask_client() as client:
        return _checked(
            lambda items: client.gather(client.map(payloads.identity, items, pure=False)), count, runs
        )


def process_pool_map(count: int, runs: int, chunksize: int) -> dict:
    with engines.process_pool() as executor:
        return _checked(
            lambda items: list(executor.map(payloads.identity, items, chunksize=chunksize)), count, runs
        )


def joblib_map(count: int, runs: int) -> dict:
    from joblib import Parallel, delayed

    with Parallel(n_jobs=engines.WORKERS, backend="loky") as parallel:
        return _checked(lambda items: parallel(delayed(payloads.identity)(x) for x in items), count, runs)
