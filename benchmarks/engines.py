"""Starting and stopping each engine the way every benchmark uses it: skyward (a local
pool), Ray, Dask (LocalCluster) and ProcessPoolExecutor, each with ``WORKERS`` workers,
bound to 127.0.0.1, no dashboards. Peer libraries are imported only when used.

``start(engine)`` takes an engine from nothing to 4 workers that have each answered a
call (what B4 times and B5 measures the memory of) and returns a handle for
``stop(engine, handle)``; ``import_engine`` imports its modules first, so start-up times
exclude imports."""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

from benchmarks import payloads

WORKERS = 4


def skyward_pool() -> Any:
    """An unopened 4-node local pool, quiet (no console, no logging)."""
    import skyward as sky

    return sky.Compute(nodes=WORKERS, options=sky.Options(console=False, logging=False))


def ray_start(num_cpus: int = WORKERS) -> str:
    """``ray.init`` a private instance (own temp dir, no dashboard, 127.0.0.1); returns
    its temp dir for ``ray_stop``."""
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    temp_dir = tempfile.mkdtemp(prefix="rb-")
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        _temp_dir=temp_dir,
        _node_ip_address="127.0.0.1",
    )
    return temp_dir


def ray_stop(temp_dir: str) -> None:
    """Shut the private Ray instance down and remove its files."""
    import ray

    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


@contextmanager
def ray_instance(num_cpus: int = WORKERS) -> Iterator[None]:
    """A private Ray instance for the duration of the block."""
    temp_dir = ray_start(num_cpus)
    try:
        yield
    finally:
        ray_stop(temp_dir)


def dask_start(workers: int = WORKERS) -> tuple[Any, Any]:
    """A Dask LocalCluster of single-threaded worker processes on 127.0.0.1, and its client."""
    import dask
    from distributed import Client, LocalCluster

    scratch = tempfile.mkdtemp(prefix="bench-dask-")
    dask.config.set({"temporary-directory": scratch})  # not /tmp/dask-scratch-space
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        local_directory=scratch,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    cluster.scratch = scratch  # removed by dask_stop
    return cluster, Client(cluster)


def dask_stop(cluster: Any, client: Any) -> None:
    """Close the client, then the cluster (its workers and scheduler), and remove its
    scratch directory."""
    client.close()
    cluster.close()
    shutil.rmtree(cluster.scratch, ignore_errors=True)


@contextmanager
def dask_client(workers: int = WORKERS) -> Iterator[Any]:
    """A Dask client on a fresh LocalCluster for the duration of the block."""
    cluster, client = dask_start(workers)
    try:
        yield client
    finally:
        dask_stop(cluster, client)


def dask_workers(client: Any) -> list[str]:
    """Addresses of the cluster's workers, sorted."""
    return sorted(client.scheduler_info()["workers"])


@contextmanager
def process_pool(workers: int = WORKERS) -> Iterator[ProcessPoolExecutor]:
    """A ProcessPoolExecutor (the platform's default start method)."""
    executor = ProcessPoolExecutor(max_workers=workers)
    try:
        yield executor
    finally:
        executor.shutdown(wait=True)


IMPORTS = {
    # `import skyward` loads almost nothing; the first pool's open imports the pool
    # machinery (from `sky.Compute` on), the local provider, Ray and the local launch (as
    # the open imports them: `load_launch`) and the collections' hosts: all counted as
    # import, not as start (what Ray's own `ray.init` imports stays in the start, as it
    # does for the Ray peer). "module:function" is a function of a module, called.
    "skyward": (
        "skyward", "skyward.api.compute", "skyward.api.pool", "skyward.providers.local.provider:load_launch",
        "skyward.providers.ray.agents", "skyward.collections.actors",
    ),
    "ray": ("ray",),
    "dask": ("distributed",),
    "process_pool": ("concurrent.futures",),
}


def import_engine(engine: str) -> None:
    """Import what ``engine`` needs, so that start-up times exclude imports."""
    for name in IMPORTS[engine]:
        module, _, function = name.partition(":")
        imported = importlib.import_module(module)
        if function:
            getattr(imported, function)()


def _start_skyward() -> Any:
    import skyward as sky

    pool = skyward_pool()
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

    temp_dir = ray_start()
    actors = [ray.remote(_Actor).remote() for _ in range(WORKERS)]
    ray.get([actor.pid.remote() for actor in actors])
    return temp_dir, actors


def _stop_ray(handle: Any) -> None:
    temp_dir, _actors = handle
    ray_stop(temp_dir)


def _start_dask() -> Any:
    cluster, client = dask_start()
    answers = client.run(payloads.pid)
    if len(answers) != WORKERS:
        raise RuntimeError(f"Dask started {len(answers)} workers, not {WORKERS}")
    return cluster, client


def _stop_dask(handle: Any) -> None:
    dask_stop(*handle)


def _start_process_pool() -> Any:
    executor = ProcessPoolExecutor(max_workers=WORKERS)
    futures = [executor.submit(payloads.pid) for _ in range(WORKERS)]
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
