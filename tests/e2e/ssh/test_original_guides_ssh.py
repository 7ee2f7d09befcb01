"""The original project's guides (tests/e2e/plugins/guides.py: DDP with gloo, scikit-learn
grid search, joblib) on SSH hosts: the very programs tests/e2e/plugins/test_original_guides.py
runs on local pools, on 2 test hosts (tests/hosts.py) sharing a home directory.

For CI's time, the guides share one pool with all their plugins (torch, sklearn, joblib)
and the joblib guide's 4 slots per node, rather than opening one each: each SSH pool
starts Ray on its hosts, and the frameworks install once into the shared home.

The hosts reach no package index: the Image names one on disk (``wheel_index``) holding
torch, scikit-learn, joblib, numpy and all they need, at the versions installed here. The
plugins add no package the Image already lists (nor torch's own index).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from conftest import ssh_provider, wait_for
from hosts import HostLab, available
from local_index import wheel_index

import skyward as sky
from tests.e2e.plugins import guides

pytestmark = pytest.mark.slow
PACKAGES = ["torch", "scikit-learn", "joblib", "numpy"]
"""What the guides import on the nodes (torch's ``.numpy()`` needs numpy)."""


@pytest.fixture(scope="module")
def guide_pool() -> Iterator[sky.Pool]:
    """2 hosts sharing a home, and one pool on them with every guide's plugins."""
    for module in ("torch", "sklearn", "joblib"):
        pytest.importorskip(module)
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(2, shared_home=True) as lab, wheel_index(PACKAGES) as url:
        image = sky.Image(pip=PACKAGES, pip_indexes=[sky.PipIndex(url, packages=PACKAGES)])
        plugins = [sky.plugins.torch(), sky.plugins.sklearn(), sky.plugins.joblib()]
        with sky.Compute(
            provider=ssh_provider(lab), nodes=2, image=image, plugins=plugins, worker=sky.Worker(concurrency=4),
            console=False, logging=False,
        ) as pool:
            yield pool
        assert wait_for(lambda: lab.leftovers() == {}, timeout=10), lab.leftovers()


def test_ddp_guide_with_gloo_on_two_hosts(guide_pool: sky.Pool) -> None:
    guides.ddp_guide(guide_pool)
    guides.group_serves_tasks(guide_pool)


@contextlib.contextmanager
def counted(pool: sky.Pool, done: list[sky.TaskCompleted]) -> Iterator[None]:
    """Add to ``done`` the tasks the pool completes during the block. Given to a guide as
    its ``compute`` block, it counts only the guide's own work (the grid search guide's
    local comparison search runs outside it): the guides run with the pool's plugins as
    their backend, so a local fallback (the same answers, locally) shows as no task."""
    unsubscribe = pool.on(sky.TaskCompleted, done.append)
    try:
        yield
    finally:
        unsubscribe()


def test_grid_search_guide_on_ssh_hosts(guide_pool: sky.Pool) -> None:
    done: list[sky.TaskCompleted] = []
    guides.grid_search_guide(counted(guide_pool, done))
    assert len(done) >= 11 and {task.node for task in done} == {0, 1}, done[:5]  # 11 candidates x 3 folds of fits
    assert [task for task in done if task.error is not None] == []


def test_joblib_guide_on_ssh_hosts(guide_pool: sky.Pool) -> None:
    done: list[sky.TaskCompleted] = []
    guides.joblib_guide(counted(guide_pool, done))
    assert sum(task.items or 1 for task in done) >= 8 and {task.node for task in done} == {0, 1}, done[:5]
    assert [task for task in done if task.error is not None] == []
