"""``sky.plugins.torch``: PyTorch on every node, with ``torch.distributed``'s group formed.

At open the plugin adds torch (and torchvision/torchaudio when asked) to the Image, from
PyTorch's index for ``cuda`` on GPU nodes and its CPU index otherwise (a local pool adds
only what this environment lacks), and picks a rendezvous port on the head. Every worker
process then has ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``NODE_RANK`` set and holds the default process
group, formed with ``backend`` (else nccl on CUDA nodes, gloo on the others) before its
tasks run and destroyed when it ends: see ``skyward.plugins.torch_group`` for when each
process joins. ``backend="nccl"`` is refused at open when a node has no NVIDIA GPU, and
an elastic pool is refused (the group's size is fixed).
"""

from __future__ import annotations

from dataclasses import replace

from skyward.core.validation import check_choice, fail
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.plugins import torch_group
from skyward.plugins.packages import rendezvous_port, require_gpus, with_packages

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
        env = {
            "MASTER_ADDR": cluster.head_addr, "MASTER_PORT": str(rendezvous_port(cluster, "torch")),
            **torch_group.placement(cluster, "torch"),
        }
        return replace(image, env={**image.env, **env})

    return torch_group.with_group(Plugin.create("torch").with_image_transform(transform), backend)


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
