"""Starting and stopping each engine the way every benchmark uses it: skyward (a local
pool), Ray, Dask (LocalCluster) and ProcessPoolExecutor, each with ``WORKERS`` workers,
bound to 127.0.0.1, no dashboards. Peer libraries are imported only when used."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

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
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    return cluster, Client(cluster)


def dask_stop(cluster: Any, client: Any) -> None:
    """Close the client, then the cluster (its workers and scheduler)."""
    client.close()
    cluster.close()


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
