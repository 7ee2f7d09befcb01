"""Programs written to the pattern of the original skyward's guides (DDP, scikit-learn grid
search, joblib, Keras), with the checks of their results; run on 2-node local pools by
tests/e2e/plugins/test_original_guides.py and on SSH test hosts by
tests/e2e/ssh/test_original_guides_ssh.py.

The original's users rely on the torch plugin forming ``torch.distributed``'s group
before their task runs: the DDP guide never calls ``init_process_group()``, wraps the
model in ``DistributedDataParallel`` when ``dist.is_initialized()``, shards with
``DistributedSampler`` and ``all_reduce``s its metrics. The other guides use the plugins
with ``n_jobs=-1`` inside ``with sky.Compute(...)`` and nothing else. Our copies use
small synthetic data (no download) so each runs in seconds.

The grid search and joblib guides take ``compute``, the ``sky.Compute(...)`` the guide
opens around its work (the local tests pass the guide's own line), or a
``contextlib.nullcontext()`` where a pool with the guide's plugin is open already (the SSH
tests open one pool with every guide's plugins, so the hosts start Ray once); the DDP
guide takes its open pool.
"""

from __future__ import annotations

import hashlib
import time
from contextlib import AbstractContextManager
from typing import Any

import pytest

import skyward as sky

QUIET = sky.Options(console=False, logging=False)


@sky.function
def train(epochs: int, batch_size: int, lr: float) -> dict[str, Any]:
    """The DDP guide's training function: no init_process_group, the plugin formed the group."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    info = sky.instance_info()
    assert info is not None
    model: nn.Module = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
    if dist.is_initialized():
        model = DistributedDataParallel(model)
    x, y = torch.randn(1024, 20), torch.randint(0, 4, (1024,))  # differs per node, as in the guide
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    accuracy = 0.0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        correct = total = 0
        for batch_x, batch_y in loader:
            optimizer.zero_grad()
            output = model(batch_x)
            criterion(output, batch_y).backward()
            optimizer.step()
            correct += int(output.argmax(1).eq(batch_y).sum())
            total += len(batch_y)
        stats = torch.tensor([correct, total], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        accuracy = 100.0 * float(stats[0]) / float(stats[1])
    weights = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy().tobytes()
    return {
        "node": info.node, "is_head": info.is_head, "backend": dist.get_backend(),
        "world": dist.get_world_size(), "accuracy": accuracy, "weights": hashlib.sha256(weights).hexdigest(),
    }


@sky.function
def group_state() -> tuple[bool, int, int]:
    import torch.distributed as dist

    return dist.is_initialized(), dist.get_rank(), dist.get_world_size()


@sky.function
def own_init_and_destroy() -> str:
    """A task written for the spec's pattern: it calls init and destroy itself."""
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    backend = dist.get_backend()
    dist.destroy_process_group()
    return backend


@sky.function
def sum_of_ranks() -> float:
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    return float(value[0])


def ddp_guide(pool: sky.Pool) -> None:
    """The DDP guide on a 2-node pool with the torch plugin: it trains, the ranks' weights agree."""
    results = train(epochs=2, batch_size=64, lr=0.01) @ pool
    assert [(r["node"], r["is_head"], r["backend"], r["world"]) for r in results] == [
        (0, True, "gloo", 2), (1, False, "gloo", 2),
    ]
    assert results[0]["weights"] == results[1]["weights"]  # DDP kept the ranks in step
    assert results[0]["accuracy"] == results[1]["accuracy"] > 0  # all_reduce'd over both ranks


def group_serves_tasks(pool: sky.Pool) -> None:
    """The plugin's group serves one-node tasks and outlives a task's own destroy."""
    assert group_state() >> pool in ((True, 0, 2), (True, 1, 2))  # one node: no rendezvous to wait for
    assert own_init_and_destroy() @ pool == ["gloo", "gloo"]  # no double init; destroy left to the plugin
    assert group_state() @ pool == [(True, 0, 2), (True, 1, 2)]
    assert sum_of_ranks() @ pool == [3.0, 3.0]


def grid_search_guide(compute: AbstractContextManager[object]) -> None:
    """The grid search guide: the search's fits run on the pool and find what a local search finds."""
    from sklearn.datasets import load_digits
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.model_selection import GridSearchCV, train_test_split
    from sklearn.pipeline import Pipeline
    from sklearn.svm import SVC

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=42)
    param_grid: list[dict[str, Any]] = [
        {"clf": [RandomForestClassifier(random_state=42)], "clf__n_estimators": [10, 30], "clf__max_depth": [None, 8]},
        {"clf": [GradientBoostingClassifier(random_state=42)], "clf__n_estimators": [5], "clf__learning_rate": [0.1]},
        {"clf": [SVC()], "clf__C": [0.1, 1, 10], "clf__kernel": ["rbf", "poly"]},
    ]
    with compute:
        grid_search = GridSearchCV(Pipeline([("clf", SVC())]), param_grid, cv=3, scoring="accuracy", n_jobs=-1)
        grid_search.fit(x_train, y_train)
    local = GridSearchCV(Pipeline([("clf", SVC())]), param_grid, cv=3, scoring="accuracy").fit(x_train, y_train)
    assert grid_search.best_params_.keys() == local.best_params_.keys()
    assert repr(grid_search.best_params_["clf"]) == repr(local.best_params_["clf"])
    assert grid_search.best_score_ == pytest.approx(local.best_score_)
    assert grid_search.score(x_test, y_test) > 0.9


def slow_task(x: int) -> int:
    time.sleep(0.2)
    return x * 2


def joblib_guide(compute: AbstractContextManager[object]) -> None:
    """The joblib guide: ``Parallel(n_jobs=-1)`` spreads over the pool's 8 slots (2 nodes x 4)."""
    from joblib import Parallel, delayed

    with compute:
        started = time.perf_counter()
        results = Parallel(n_jobs=-1)(delayed(slow_task)(i) for i in range(40))
        elapsed = time.perf_counter() - started
    assert results == [i * 2 for i in range(40)]
    assert elapsed < 40 * 0.2 * 0.75, elapsed  # 8 slots: well under the sequential 8 s


@sky.function
def train_keras(epochs: int = 3, batch_size: int = 64) -> dict[str, Any]:
    """The Keras guide's function, on synthetic data in MNIST's shape (no download)."""
    import keras
    import numpy as np
    from keras import layers

    info = sky.instance_info()
    assert info is not None
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(10, 784)).astype("float32")
    y_all = rng.integers(0, 10, 2000)
    x_all = centers[y_all] + rng.normal(scale=0.5, size=(2000, 784)).astype("float32")
    x_train, y_train = sky.shard(x_all, y_all, shuffle=True, seed=42)
    model = keras.Sequential([
        keras.Input((784,)), layers.Dense(64, activation="relu"), layers.Dropout(0.2),
        layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, epochs=epochs, batch_size=batch_size, verbose=0)
    return {"node": info.node, "samples": len(x_train), "accuracy": float(history.history["accuracy"][-1])}


def keras_guide(pool: sky.Pool) -> None:
    """The Keras guide on a 2-node pool with the jax and keras plugins: each node trains on
    its half of the data."""
    results = train_keras() @ pool
    assert [(r["node"], r["samples"]) for r in results] == [(0, 1000), (1, 1000)]
    assert all(r["accuracy"] > 0.9 for r in results), results
