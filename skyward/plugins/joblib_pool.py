"""The pool as a joblib parallel backend, and the ``joblib``/``sklearn`` plugins.

``SkywardBackend`` is a joblib ``ParallelBackendBase`` registered as "skyward": each
batch of calls joblib makes (a ``BatchedCalls``) is sent to the pool as one task with
``>`` and its result handed back through joblib's callback, so ``Parallel(n_jobs=-1)``
and scikit-learn's ``n_jobs=-1`` (``GridSearchCV``, ``cross_val_score``, ...) fan out
over every task slot of the pool (``n_jobs=-1``: nodes x ``Worker.concurrency``). Batch
sizes adapt to how long batches take (joblib's auto-batching). Nested ``Parallel`` calls
inside a task run sequentially on that node.

``use_pool(pool)`` makes the pool the active joblib backend in the calling thread for
the duration of a ``with`` block; the plugins do that for the pool's whole life (from
``around_client``) and add joblib / scikit-learn to the Image.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import NoReturn, TypeVar

from joblib import parallel_config, register_parallel_backend
from joblib._parallel_backends import AutoBatchingMixin, ParallelBackendBase, SequentialBackend

from skyward.core.function import PendingFunction
from skyward.core.validation import fail
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import ClientPool, Plugin
from skyward.plugins.packages import with_packages

NAME = "skyward"
P = TypeVar("P", bound=ClientPool)


class _Batch:
    """A joblib batch as a task (named for events and errors)."""

    def __init__(self, calls: Callable[[], object]) -> None:
        self.calls = calls
        self.__qualname__ = "joblib-batch"

    def __call__(self) -> object:
        return self.calls()


class SkywardBackend(AutoBatchingMixin, ParallelBackendBase):
    """joblib batches run as tasks of ``pool`` (see the module docstring)."""

    supports_retrieve_callback = True
    default_n_jobs = -1

    def __init__(self, pool: ClientPool | None = None, **kwargs: object) -> None:
        if pool is None:
            raise ValueError(
                'the "skyward" joblib backend needs a pool: use sky.integrations.joblib_backend(pool) '
                "or a pool with sky.plugins.joblib()/sky.plugins.sklearn()"
            )
        super().__init__(**kwargs)
        self.pool = pool
        self._futures: set[Future[object]] = set()
        self._lock = threading.Lock()

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """Every task slot of the pool for -1 (or None); ``n_jobs`` itself when positive."""
        slots = max(1, self.pool.current_nodes() * self.pool.options.resolved_worker.concurrency)
        if n_jobs is None or n_jobs == -1:
            return slots
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        return n_jobs if n_jobs > 0 else max(1, slots + 1 + n_jobs)

    def submit(
        self, func: Callable[[], object], callback: Callable[[Future[object]], object] | None = None
    ) -> Future[object]:
        """Send one batch to the pool; ``callback`` runs when its result is in."""
        future = self.pool.run_async(PendingFunction(_Batch(func)))
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def _forget(self, future: Future[object]) -> None:
        with self._lock:
            self._futures.discard(future)

    def retrieve_result_callback(self, out: Future[object]) -> object:
        """The batch's results, or its remote exception raised as its own type."""
        return out.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """Cancel the batches not started yet (a running one finishes on its node)."""
        with self._lock:
            futures = list(self._futures)
        for future in futures:
            future.cancel()

    def get_nested_backend(self) -> tuple[SequentialBackend, int | None]:
        """Parallel calls inside a task run sequentially on its node."""
        return SequentialBackend(nesting_level=(self.nesting_level or 0) + 1), None

    def __reduce__(self) -> NoReturn:
        raise TypeError("the skyward joblib backend stays on the client (it holds the pool)")


@contextlib.contextmanager
def use_pool(pool: P) -> Iterator[P]:
    """Within the block, joblib (and so scikit-learn's ``n_jobs``) runs on ``pool``."""
    register_parallel_backend(NAME, SkywardBackend)
    with parallel_config(backend=NAME, pool=pool):
        yield pool


def _plugin(name: str, requirements: list[str]) -> Plugin:
    def transform(image: Image, cluster: Cluster) -> Image:
        return with_packages(image, cluster, requirements)

    return Plugin.create(name).with_image_transform(transform).with_around_client(lambda pool, cluster: use_pool(pool))


def joblib(*, version: str | None = None) -> Plugin:
    """joblib on the nodes, and the pool as joblib's backend on the client while it is open."""
    return _plugin("joblib", [_pin("joblib", "joblib", version)])


def sklearn(*, version: str | None = None) -> Plugin:
    """scikit-learn on the nodes, and the pool as its ``n_jobs`` backend while it is open."""
    return _plugin("sklearn", [_pin("sklearn", "scikit-learn", version), "joblib"])


def _pin(plugin: str, package: str, version: str | None) -> str:
    if version is None:
        return package
    if not isinstance(version, str) or not version:
        raise fail(f"plugins.{plugin}", "version", version, 'use None (any) or a version such as "1.5.2"')
    return f"{package}=={version}"
