"""Programs written to the pattern of the original skyward's guides (DDP, scikit-learn grid
search, joblib, Keras; in tests/e2e/plugins/guides.py, shared with
tests/e2e/ssh/test_original_guides_ssh.py) run unedited on 2-node local pools (CPU).

See guides.py for what the guides rely on. Needs the ``[plugins]`` extra; each test
skips when its framework is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

import skyward as sky
from tests.e2e.plugins import guides
from tests.e2e.plugins.guides import QUIET, group_state, sum_of_ranks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def torch_pool() -> Iterator[sky.Pool]:
    pytest.importorskip("torch")
    with sky.Compute(nodes=2, plugins=[sky.plugins.torch()], options=QUIET) as pool:
        yield pool


def test_ddp_guide_trains_and_the_ranks_weights_agree(torch_pool: sky.Pool) -> None:
    guides.ddp_guide(torch_pool)


def test_the_group_serves_one_node_tasks_and_outlives_a_tasks_own_destroy(torch_pool: sky.Pool) -> None:
    guides.group_serves_tasks(torch_pool)


def test_process_executor_children_join_on_their_first_task() -> None:
    pytest.importorskip("torch")
    options = sky.Options(worker=sky.Worker(executor="process"), console=False, logging=False)
    with sky.Compute(nodes=2, plugins=[sky.plugins.torch(backend="gloo")], options=options) as pool:
        assert sum_of_ranks() @ pool == [3.0, 3.0]
        assert group_state() >> pool in ((True, 0, 2), (True, 1, 2))  # the children hold the group now


def test_an_elastic_pool_is_refused_naming_the_field() -> None:
    pytest.importorskip("torch")
    pool = sky.Compute(nodes=(1, 2), plugins=[sky.plugins.torch()], options=QUIET)
    with pytest.raises(ValueError, match=r"Spec\.nodes=.*fixed number of nodes"), pool:
        pass


@sky.function
def accelerate_env() -> tuple[str, str, str, int, str]:
    import os

    import torch.distributed as dist
    from accelerate import Accelerator

    accelerator = Accelerator()
    return (
        os.environ["ACCELERATE_USE_FSDP"], os.environ["FSDP_SHARDING_STRATEGY"],
        os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"], accelerator.num_processes, dist.get_backend(),
    )


def test_accelerate_takes_the_originals_config_keys() -> None:
    pytest.importorskip("accelerate")
    config = {
        "fsdp": {"sharding_strategy": "FULL_SHARD", "transformer_layer_cls_to_wrap": "Block"},
        "mixed_precision": "no", "backend": "gloo",
    }
    with sky.Compute(nodes=2, plugins=[sky.plugins.accelerate(config)], options=QUIET) as pool:
        assert accelerate_env() @ pool == [("true", "FULL_SHARD", "Block", 2, "gloo")] * 2


def test_grid_search_guide() -> None:
    pytest.importorskip("sklearn")
    guides.grid_search_guide(
        sky.Compute(nodes=2, worker=sky.Worker(concurrency=2), plugins=[sky.plugins.sklearn()], console=False)
    )


def test_joblib_guide() -> None:
    pytest.importorskip("joblib")
    guides.joblib_guide(
        sky.Compute(nodes=2, worker=sky.Worker(concurrency=4), plugins=[sky.plugins.joblib()], console=False)
    )


def test_keras_guide() -> None:
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
        pytest.skip("needs keras and jax: pip install -e '.[plugins]'")  # keras imports only under its backend
    plugins = [sky.plugins.jax(), sky.plugins.keras(backend="jax")]
    with sky.Compute(nodes=2, plugins=plugins, options=QUIET) as pool:
        guides.keras_guide(pool)
