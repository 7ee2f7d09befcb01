"""``sky.plugins.torch``: PyTorch on every node, with ``torch.distributed`` set up.

At open the plugin adds torch (and torchvision/torchaudio when asked) to the Image, from
PyTorch's index for ``cuda`` on GPU nodes and its CPU index otherwise (a local pool adds
only what this environment lacks), and picks a rendezvous port on the head. Each node
process then has ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``NODE_RANK`` set, so
``torch.distributed.init_process_group()`` with no arguments joins every node. With
``backend=None`` torch's own default applies (gloo for CPU tensors, nccl for CUDA
tensors on GPU nodes); a named ``backend`` becomes ``init_process_group``'s default in
the node processes (torch is then imported when they start). ``backend="nccl"`` is
refused at open when a node has no NVIDIA GPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace

from skyward.api.instance import InstanceInfo
from skyward.api.spec import Image
from skyward.api.validation import check_choice, fail
from skyward.plugins.cluster import Cluster
from skyward.plugins.packages import rendezvous_port, require_gpus, with_packages
from skyward.plugins.plugin import Plugin

BACKENDS = ("gloo", "nccl")
TORCH_INDEX = "https://download.pytorch.org/whl/{variant}"


def torch(
    *,
    backend: str | None = None,
    cuda: str = "cu128",
    version: str = "latest",
    vision: str | bool | None = None,
    audio: str | bool | None = None,
) -> Plugin:
    """PyTorch with ``torch.distributed`` ready on every node (see the module docstring).
    ``cuda`` names PyTorch's wheel variant for GPU nodes ("cu128", "cu126", ...);
    ``version`` pins torch ("latest": none); ``vision``/``audio`` add torchvision /
    torchaudio (True, or a version)."""
    if backend is not None:
        check_choice("plugins.torch", "backend", backend, BACKENDS)
    if not isinstance(cuda, str) or not (cuda.startswith("cu") and cuda[2:].isdigit()):
        raise fail("plugins.torch", "cuda", cuda, 'use a PyTorch wheel variant such as "cu128" or "cu126"')
    packages = [_pin("torch", version), *_extra("torchvision", vision), *_extra("torchaudio", audio)]

    def transform(image: Image, cluster: Cluster) -> Image:
        if backend == "nccl":
            require_gpus(cluster, 'plugins.torch(backend="nccl")', 'use backend="gloo" (or None) or GPU nodes')
        variant = "cpu" if cluster.nodes_without_gpu() else cuda
        image = with_packages(image, cluster, packages, TORCH_INDEX.format(variant=variant))
        env = {"MASTER_ADDR": cluster.head_addr, "MASTER_PORT": str(rendezvous_port(cluster, "torch"))}
        return replace(image, env={**image.env, **env})

    @contextlib.contextmanager
    def node_process(info: InstanceInfo) -> Iterator[None]:
        os.environ.update(rank_env(info))
        if backend is None:
            yield
            return
        with default_backend(backend):
            yield

    return (
        Plugin.create("torch")
        .with_image_transform(transform)
        .with_around_app(node_process)
        .with_around_process(node_process)
    )


@contextlib.contextmanager
def default_backend(backend: str) -> Iterator[None]:
    """Make ``backend`` what ``torch.distributed.init_process_group()`` uses when called without one."""
    import torch.distributed as dist

    original = dist.init_process_group

    def init_process_group(*args: object, **kwargs: object) -> object:
        if not args and kwargs.get("backend") is None:
            kwargs["backend"] = backend
        return original(*args, **kwargs)  # type: ignore[arg-type]

    dist.init_process_group = init_process_group  # type: ignore[assignment]
    try:
        yield
    finally:
        dist.init_process_group = original


def rank_env(info: InstanceInfo) -> dict[str, str]:
    """The rank variables of a worker (one process per worker: ``workers_per_node`` per node)."""
    return {
        "WORLD_SIZE": str(info.total_workers),
        "RANK": str(info.global_worker_index),
        "LOCAL_RANK": str(info.worker),
        "LOCAL_WORLD_SIZE": str(info.workers_per_node),
        "NODE_RANK": str(info.node),
    }


def _pin(name: str, version: str) -> str:
    if not isinstance(version, str) or not version:
        raise fail("plugins.torch", "version", version, 'use "latest" or a version such as "2.5.1"')
    return name if version == "latest" else f"{name}=={version}"


def _extra(name: str, wanted: str | bool | None) -> list[str]:
    if wanted is None or wanted is False:
        return []
    if wanted is True:
        return [name]
    if isinstance(wanted, str) and wanted:
        return [f"{name}=={wanted}"]
    field = "vision" if name == "torchvision" else "audio"
    raise fail("plugins.torch", field, wanted, f"use True (latest {name}) or a version string")
