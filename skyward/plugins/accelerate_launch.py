"""``sky.plugins.accelerate``: what ``accelerate launch`` sets up, for one process per worker.

``accelerate launch`` starts ``num_processes`` copies of a script and hands each the
environment Hugging Face Accelerate reads. skyward already runs one process per worker
(``nodes x workers_per_node``), so this plugin does not run ``accelerate launch``: it
gives every worker that same environment. At open it adds ``accelerate`` to the Image,
checks ``config`` against the pool, and sets the rendezvous (``MASTER_ADDR``,
``MASTER_PORT``) and the ``ACCELERATE_*``/``FSDP_*`` variables that ``config`` implies
(``skyward.plugins.accelerate_config``: the keys of ``accelerate config``'s YAML, or the
original skyward's ``fsdp``/``deepspeed``/``mixed_precision``/``backend``); on CPU
nodes it sets ``ACCELERATE_USE_CPU``. Each worker then gets its ranks and joins
``torch.distributed``'s default group (``skyward.plugins.torch_group``: ``backend``,
else nccl on CUDA nodes and gloo on the others), so ``accelerate.Accelerator()`` inside
a task spans the pool. Keys that only make sense for ``accelerate launch`` starting
processes itself (``machine_rank``, ``main_process_ip``, ...) are refused, naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from skyward.core.validation import fail
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.plugins import torch_group
from skyward.plugins.accelerate_config import FIELD, check_config, config_env
from skyward.plugins.packages import rendezvous_port, require_gpus, with_packages


def accelerate(config: Mapping[str, object] | None = None) -> Plugin:
    """Hugging Face Accelerate across the pool (see the module docstring)."""
    if config is not None and not isinstance(config, Mapping):
        raise fail(FIELD, "config", config, 'use a dict such as {"mixed_precision": "bf16"}')
    config = dict(config or {})
    check_config(config)
    static_env = config_env(config)
    backend = str(config["backend"]) if "backend" in config else None  # checked: "gloo" or "nccl"

    def transform(image: Image, cluster: Cluster) -> Image:
        _check_layout(config, cluster)
        if backend == "nccl":
            require_gpus(cluster, "plugins.accelerate({'backend': 'nccl'})", "use 'gloo' (or leave it out) or GPU nodes")
        image = with_packages(image, cluster, ["accelerate"])
        env = {
            **static_env, "MASTER_ADDR": cluster.head_addr,
            "MASTER_PORT": str(rendezvous_port(cluster, "accelerate")), **torch_group.placement(cluster, "accelerate"),
        }
        if cluster.nodes_without_gpu():
            env.setdefault("ACCELERATE_USE_CPU", "true")
        return replace(image, env={**image.env, **env})

    return torch_group.with_group(Plugin.create("accelerate").with_image_transform(transform), backend)


def _check_layout(config: Mapping[str, object], cluster: Cluster) -> None:
    """``num_processes``/``num_machines`` must match what the pool runs."""
    workers = cluster.total_nodes * (cluster.infos[0].workers_per_node if cluster.infos else 1)
    for key, has in (("num_processes", workers), ("num_machines", cluster.total_nodes)):
        if key in config and config[key] != has:
            raise fail(
                FIELD, f"config[{key!r}]", config[key],
                f"this pool runs {has} (one process per worker: {cluster.total_nodes} nodes); "
                "leave it out or match the pool's nodes",
            )
