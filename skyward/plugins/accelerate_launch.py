"""``sky.plugins.accelerate``: what ``accelerate launch`` sets up, for one process per worker.

``accelerate launch`` starts ``num_processes`` copies of a script and hands each the
environment Hugging Face Accelerate reads. skyward already runs one process per worker
(``nodes x workers_per_node``), so this plugin does not run ``accelerate launch``: it
gives every worker that same environment. At open it adds ``accelerate`` to the Image,
checks ``config`` against the pool, and sets the rendezvous (``MASTER_ADDR``,
``MASTER_PORT``) and the ``ACCELERATE_*``/``FSDP_*`` variables that ``config`` (the
keys of ``accelerate config``'s YAML) implies; each worker gets its ranks (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ...) and, on CPU nodes, ``ACCELERATE_USE_CPU``. Inside
a task, ``accelerate.Accelerator()`` then spans the pool (gloo on CPU nodes, nccl on
GPU nodes). Keys that only make sense for ``accelerate launch`` starting processes
itself (``machine_rank``, ``main_process_ip``, ...) are refused, naming the key.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from skyward.api.instance import InstanceInfo
from skyward.api.spec import Image
from skyward.api.validation import fail
from skyward.plugins.cluster import Cluster
from skyward.plugins.packages import rendezvous_port, with_packages
from skyward.plugins.plugin import Plugin
from skyward.plugins.torch_dist import rank_env

SET_BY_SKYWARD = ("machine_rank", "main_process_ip", "main_process_port", "same_network", "rdzv_backend")
PLAIN = {
    "mixed_precision": "ACCELERATE_MIXED_PRECISION",
    "gradient_accumulation_steps": "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
    "use_cpu": "ACCELERATE_USE_CPU",
    "debug": "ACCELERATE_DEBUG_MODE",
}
SECTIONS = {"fsdp_config": "FSDP_", "deepspeed_config": "ACCELERATE_DEEPSPEED_", "dynamo_config": "ACCELERATE_"}
DISTRIBUTED = {
    "NO": {}, "MULTI_CPU": {}, "MULTI_GPU": {},
    "FSDP": {"ACCELERATE_USE_FSDP": "true"}, "DEEPSPEED": {"ACCELERATE_USE_DEEPSPEED": "true"},
}
KNOWN = (*PLAIN, *SECTIONS, "distributed_type", "num_processes", "num_machines", "compute_environment")


def accelerate(config: Mapping[str, Any] | None = None) -> Plugin:
    """Hugging Face Accelerate across the pool (see the module docstring)."""
    config = dict(config or {})
    _check_keys(config)
    static_env = config_env(config)

    def transform(image: Image, cluster: Cluster) -> Image:
        _check_layout(config, cluster)
        image = with_packages(image, cluster, ["accelerate"])
        env = {
            **static_env, "MASTER_ADDR": cluster.head_addr,
            "MASTER_PORT": str(rendezvous_port(cluster, "accelerate")),
        }
        if cluster.nodes_without_gpu():
            env.setdefault("ACCELERATE_USE_CPU", "true")
        return replace(image, env={**image.env, **env})

    @contextlib.contextmanager
    def ranks(info: InstanceInfo) -> Iterator[None]:
        os.environ.update(rank_env(info))
        yield

    return (
        Plugin.create("accelerate").with_image_transform(transform).with_around_app(ranks).with_around_process(ranks)
    )


def config_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The environment ``accelerate launch`` derives from ``config``'s keys."""
    env: dict[str, str] = {}
    for key, variable in PLAIN.items():
        if key in config:
            env[variable] = _text(config[key])
    kind = str(config.get("distributed_type", "NO")).upper()
    env.update(DISTRIBUTED[kind])
    for section, prefix in SECTIONS.items():
        for key, value in dict(config.get(section) or {}).items():
            name = key.removeprefix("fsdp_") if section == "fsdp_config" else key
            env[f"{prefix}{name.upper()}"] = _text(value)
    return env


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_keys(config: dict[str, Any]) -> None:
    for key, value in config.items():
        if key in SET_BY_SKYWARD:
            raise fail(
                "plugins.accelerate", f"config[{key!r}]", value,
                "skyward sets it for each node (the head is the main process); remove it",
            )
        if key not in KNOWN:
            raise fail("plugins.accelerate", f"config[{key!r}]", value, f"supported keys are {', '.join(KNOWN)}")
        if key in SECTIONS and not isinstance(value, Mapping):
            raise fail("plugins.accelerate", f"config[{key!r}]", value, "use a dict of that section's keys")
    kind = str(config.get("distributed_type", "NO")).upper()
    if kind not in DISTRIBUTED:
        raise fail("plugins.accelerate", "config['distributed_type']", config["distributed_type"],
                   f"use one of {', '.join(DISTRIBUTED)}")


def _check_layout(config: dict[str, Any], cluster: Cluster) -> None:
    """``num_processes``/``num_machines`` must match what the pool runs."""
    workers = cluster.total_nodes * (cluster.infos[0].workers_per_node if cluster.infos else 1)
    for key, has in (("num_processes", workers), ("num_machines", cluster.total_nodes)):
        if key in config and config[key] != has:
            raise fail(
                "plugins.accelerate", f"config[{key!r}]", config[key],
                f"this pool runs {has} (one process per worker: {cluster.total_nodes} nodes); "
                "leave it out or match the pool's nodes",
            )
