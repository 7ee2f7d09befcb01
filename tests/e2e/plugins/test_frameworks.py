"""The framework plugins and the older integrations on 2-node local pools, beyond what
the examples show: scikit-learn's fits spread over both nodes (counted per node), joblib
and scikit-learn through ``sky.integrations``, a named torch backend as
``init_process_group``'s default, the ``integrations.torch`` decorator, and
``sky.DistributedSampler`` in a DataLoader.

Needs the ``[plugins]`` extra (see test_plugin_examples.py for its size and install
time); each test skips when its framework is missing.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import pytest

import skyward as sky

pytestmark = pytest.mark.slow
QUIET = sky.Options(console=False, logging=False)


@pytest.fixture(scope="module")
def sklearn_pool() -> Iterator[sky.Pool]:
    pytest.importorskip("sklearn")
    with sky.Compute(nodes=2, plugins=[sky.plugins.sklearn()], options=QUIET) as pool:
        yield pool


@sky.function
def warm_up() -> None:
    import sklearn.svm  # noqa: F401 - the first import takes a while; do it on both nodes first


def test_grid_search_spreads_fits_over_both_nodes(sklearn_pool: sky.Pool) -> None:
    from sklearn.datasets import make_classification
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    warm_up() @ sklearn_pool
    x, y = make_classification(n_samples=300, n_features=10, random_state=0)
    grid = {"C": [0.01, 0.1, 1, 10, 100], "gamma": ["scale", 0.01, 0.1]}
    per_node: collections.Counter[int] = collections.Counter()
    stop = sklearn_pool.on(sky.TaskCompleted, lambda event: per_node.update([event.node]))
    try:
        remote = GridSearchCV(SVC(), grid, cv=4, n_jobs=-1).fit(x, y)
    finally:
        stop()
    local = GridSearchCV(SVC(), grid, cv=4).fit(x, y)
    assert remote.best_params_ == local.best_params_
    assert remote.best_score_ == pytest.approx(local.best_score_)
    assert per_node[0] > 0 and per_node[1] > 0, per_node  # both nodes fitted


def test_joblib_and_sklearn_backends_of_an_open_pool() -> None:
    pytest.importorskip("sklearn")
    from joblib import Parallel, delayed
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    with sky.Compute(nodes=2, options=QUIET) as pool:
        with sky.integrations.joblib_backend(pool):
            nodes = Parallel(n_jobs=-1, batch_size=1)(delayed(_node)() for _ in range(12))
        with sky.integrations.sklearn_backend(pool):
            scores = cross_val_score(LogisticRegression(max_iter=500), *load_iris(return_X_y=True), cv=4, n_jobs=-1)
    assert set(nodes) == {0, 1}
    assert len(scores) == 4 and min(scores) > 0.8


def _node() -> int:
    return sky.instance_info().node


def test_scikit_learn_pool_and_joblib_pool() -> None:
    pytest.importorskip("sklearn")
    from joblib import Parallel, delayed

    with sky.integrations.JoblibPool(nodes=2, concurrency=2, display="quiet") as pool:
        assert pool.current_nodes() == 2
        assert Parallel(n_jobs=-1)(delayed(abs)(-i) for i in range(8)) == list(range(8))
    with sky.integrations.ScikitLearnPool(nodes=2, display="quiet") as pool:
        assert [p.name for p in pool.spec.plugins] == ["sklearn"]


@sky.function
def backend_and_rank() -> tuple[str, int, int]:
    import torch.distributed as dist

    dist.init_process_group()  # no backend: the plugin's
    try:
        return dist.get_backend(), dist.get_rank(), dist.get_world_size()
    finally:
        dist.destroy_process_group()


def test_torch_named_backend_is_init_process_groups_default() -> None:
    pytest.importorskip("torch")
    with sky.Compute(nodes=2, plugins=[sky.plugins.torch(backend="gloo")], options=QUIET) as pool:
        assert backend_and_rank() @ pool == [("gloo", 0, 2), ("gloo", 1, 2)]


@sky.integrations.torch(backend="gloo")
@sky.function
def all_reduce_ranks() -> float:
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    return float(value[0])


@sky.function
def sampled(epochs: int) -> list[list[int]]:
    from torch.utils.data import DataLoader

    sampler = sky.DistributedSampler(list(range(10)), shuffle=True)
    seen = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen.append([int(i) for batch in DataLoader(list(range(10)), sampler=sampler, batch_size=2) for i in batch])
    return seen


def test_integrations_torch_and_distributed_sampler() -> None:
    pytest.importorskip("torch")
    with sky.Compute(nodes=2, options=QUIET) as pool:
        assert all_reduce_ranks() @ pool == [3.0, 3.0]
        per_node: list[Any] = sampled(2) @ pool
    for epoch in range(2):
        first, second = per_node[0][epoch], per_node[1][epoch]
        assert len(first) == len(second) == 5 and sorted(first + second) == list(range(10))  # disjoint, complete
    assert per_node[0][0] != per_node[0][1]  # set_epoch reshuffles
