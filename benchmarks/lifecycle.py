"""Each engine from nothing to 4 workers that have each answered a call, and back to
nothing: the steps B4 times and B5 measures the memory between.

``start(engine)`` returns a handle for ``stop(engine, handle)``; ``IMPORTS`` names the
modules each engine needs, imported (and timed) before the clock starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads

IMPORTS = {
    "skyward": ("skyward",),
    "ray": ("ray",),
    "dask": ("distributed",),
    "process_pool": ("concurrent.futures",),
}


def import_engine(engine: str) -> None:
    """Import what ``engine`` needs, so that start-up times exclude imports."""
    for module in IMPORTS[engine]:
        importlib.import_module(module)


def _start_skyward() -> Any:
    import skyward as sky

    pool = engines.skyward_pool()
    pool.open()
    pool.broadcast(sky.function(payloads.pid)())
    return pool


def _stop_skyward(pool: Any) -> None:
    pool.close()


class _Actor:
    def pid(self) -> int:
        return payloads.pid()


def _start_ray() -> Any:
    import ray

    temp_dir = engines.ray_start()
    actors = [ray.remote(_Actor).remote() for _ in range(engines.WORKERS)]
    ray.get([actor.pid.remote() for actor in actors])
    return temp_dir, actors


def _stop_ray(handle: Any) -> None:
    temp_dir, _actors = handle
    engines.ray_stop(temp_dir)


def _start_dask() -> Any:
    cluster, client = engines.dask_start()
    answers = client.run(payloads.pid)
    if len(answers) != engines.WORKERS:
        raise RuntimeError(f"Dask started {len(answers)} workers, not {engines.WORKERS}")
    return cluster, client


def _stop_dask(handle: Any) -> None:
    engines.dask_stop(*handle)


def _start_process_pool() -> Any:
    from concurrent.futures import ProcessPoolExecutor

    executor = ProcessPoolExecutor(max_workers=engines.WORKERS)
    futures = [executor.submit(payloads.pid) for _ in range(engines.WORKERS)]
    for future in futures:
        future.result()
    return executor


def _stop_process_pool(executor: Any) -> None:
    executor.shutdown(wait=True)


STEPS: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
    "skyward": (_start_skyward, _stop_skyward),
    "ray": (_start_ray, _stop_ray),
    "dask": (_start_dask, _stop_dask),
    "process_pool": (_start_process_pool, _stop_process_pool),
}


def start(engine: str) -> Any:
    """Start ``engine`` with 4 workers and wait until each has answered a call."""
    return STEPS[engine][0]()


def stop(engine: str, handle: Any) -> None:
    """Stop what ``start`` started."""
    STEPS[engine][1](handle)
