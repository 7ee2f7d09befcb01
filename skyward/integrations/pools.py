"""joblib and scikit-learn on a pool, the older way: ``JoblibPool``/``ScikitLearnPool``
open a pool with the backend active, ``joblib_backend(pool)``/``sklearn_backend(pool)``
make an open pool the backend within a ``with`` block (see ``plugins.joblib_pool``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from skyward.api.compute import ComputePool
from skyward.api.pool import Pool
from skyward.model.plugin import Plugin
from skyward.plugins.joblib_pool import joblib, sklearn, use_pool


def joblib_backend(pool: Pool) -> contextlib.AbstractContextManager[Pool]:
    """Within the block, ``joblib.Parallel`` runs on ``pool`` (``n_jobs=-1``: every slot)."""
    return use_pool(pool)


def sklearn_backend(pool: Pool) -> contextlib.AbstractContextManager[Pool]:
    """Within the block, scikit-learn's ``n_jobs`` runs on ``pool`` (it uses joblib)."""
    return use_pool(pool)


@contextlib.contextmanager
def JoblibPool(*, joblib_version: str | None = None, **compute_pool: object) -> Iterator[Pool]:  # noqa: N802
    """A pool (``ComputePool``'s parameters) with joblib on its nodes, used by
    ``joblib.Parallel`` while the block runs."""
    with _opened(_compute_pool(**compute_pool), joblib(version=joblib_version)) as pool:
        yield pool


@contextlib.contextmanager
def ScikitLearnPool(*, sklearn_version: str | None = None, **compute_pool: object) -> Iterator[Pool]:  # noqa: N802
    """A pool (``ComputePool``'s parameters) with scikit-learn on its nodes, used by its
    ``n_jobs`` while the block runs."""
    with _opened(_compute_pool(**compute_pool), sklearn(version=sklearn_version)) as pool:
        yield pool


_compute_pool: Callable[..., Pool] = ComputePool
"""``ComputePool`` taking its parameters as they were given (it checks them itself)."""


@contextlib.contextmanager
def _opened(pool: Pool, plugin: Plugin) -> Iterator[Pool]:
    pool.specs = tuple(replace(spec, plugins=(*spec.plugins, plugin)) for spec in pool.specs)
    with pool:
        yield pool
