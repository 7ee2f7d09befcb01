"""``sky.plugins.accelerate(config)``: the original skyward's keys map to the variables
``accelerate launch`` sets, and keys nothing would read are refused, naming them (a pool
reading them is in test_original_guides.py)."""

from __future__ import annotations

from typing import Any

import pytest

import skyward as sky
from skyward.plugins.accelerate_config import config_env


def test_the_originals_fsdp_and_deepspeed_keys_become_accelerates_variables() -> None:
    fsdp = config_env({"fsdp": {"sharding_strategy": "FULL_SHARD", "fsdp_offload_params": True,
                                "transformer_layer_cls_to_wrap": "Block"}, "mixed_precision": "bf16"})
    assert fsdp == {
        "ACCELERATE_MIXED_PRECISION": "bf16", "ACCELERATE_USE_FSDP": "true", "FSDP_SHARDING_STRATEGY": "FULL_SHARD",
        "FSDP_OFFLOAD_PARAMS": "true", "FSDP_TRANSFORMER_CLS_TO_WRAP": "Block",
    }
    deepspeed = config_env({"deepspeed": {"zero_stage": 3, "zero3_init_flag": False, "gradient_clipping": 1.0}})
    assert deepspeed == {
        "ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
        "ACCELERATE_DEEPSPEED_ZERO3_INIT": "false", "ACCELERATE_GRADIENT_CLIPPING": "1.0",
    }


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"fsdp": {"shard_everything": True}}, "config['fsdp']['shard_everything']"),
        ({"deepspeed": {"stage": 3}}, "config['deepspeed']['stage']"),
        ({"fsdp": {}, "deepspeed": {}}, "config['deepspeed']"),
        ({"fsdp": "FULL_SHARD"}, "config['fsdp']"),
        ({"fsdp": {}, "distributed_type": "DEEPSPEED"}, "config['distributed_type']"),
        ({"backend": "mpi"}, "config['backend']"),
        ({"main_process_ip": "10.0.0.1"}, "config['main_process_ip']"),
        ({"zero_stage": 2}, "config['zero_stage']"),
    ],
)
def test_keys_nothing_would_read_are_refused_by_name(config: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError) as refused:
        sky.plugins.accelerate(config)
    assert named in str(refused.value)
