"""joblib and scikit-learn on a pool, the older way: ``JoblibPool``/``ScikitLearnPool``
open a pool with the backend active, ``joblib_backend(pool)``/``sklearn_backend(pool)``
make an open pool the backend within a ``with`` block (see ``plugins.joblib_pool``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from skyward.api.compute import ComputePool
from skyward.model.plugin import Plugin
from skyward.plugins.joblib_pool import joblib, sklearn, use_pool


def joblib_backend(pool: Any) -> contextlib.AbstractContextManager[Any]:
    """Within the block, ``joblib.Parallel`` runs on ``pool`` (``n_jobs=-1``: every slot)."""
    return use_pool(pool)


def sklearn_backend(pool: Any) -> contextlib.AbstractContextManager[Any]:
    """Within the block, scikit-learn's ``n_jobs`` runs on ``pool`` (it uses joblib)."""
    return use_pool(pool)


@contextlib.contextmanager
def JoblibPool(*, joblib_version: str | None = None, **compute_pool: Any) -> Iterator[Any]:  # noqa: N802
    """A pool (``ComputePool``'s parameters) with joblib on its nodes, used by
    ``joblib.Parallel`` while the block runs."""
    with _opened(compute_pool, joblib(version=joblib_version)) as pool:
        yield pool


@contextlib.contextmanager
def ScikitLearnPool(*, sklearn_version: str | None = None, **compute_pool: Any) -> Iterator[Any]:  # noqa: N802
    """A pool (``ComputePool``'s parameters) with scikit-learn on its nodes, used by its
    ``n_jobs`` while the block runs."""
    with _opened(compute_pool, sklearn(version=sklearn_version)) as pool:
        yield pool


@contextlib.contextmanager
def _opened(compute_pool: dict[str, Any], plugin: Plugin) -> Iterator[Any]:
    pool = ComputePool(**compute_pool)
    pool.specs = tuple(replace(spec, plugins=(*spec.plugins, plugin)) for spec in pool.specs)
    with pool:
        yield pool
