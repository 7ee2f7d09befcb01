"""Helpers the built-in plugins share: adding packages to an Image (on a local pool only
those this environment lacks), a rendezvous port on the head, and refusing pools
without the GPUs a plugin needs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import socket
from collections.abc import Sequence
from dataclasses import replace

from packaging.requirements import Requirement

from skyward.image.image import Image, PipIndex
from skyward.image.script import requirement_name
from skyward.model.cluster import Cluster

PORT_BASE = 29500
PORT_SPAN = 2000


def with_packages(image: Image, cluster: Cluster, requirements: Sequence[str], index: str | None = None) -> Image:
    """``image`` with ``requirements`` added to ``pip`` (a package it already lists is
    left as the user wrote it). On a local pool a requirement this environment already
    satisfies is not added, so no venv is built for it. ``index``: the PipIndex the
    added packages come from."""
    listed = {requirement_name(p) for p in image.pip}
    wanted = [r for r in requirements if requirement_name(r) not in listed]
    if cluster.is_local:
        wanted = [r for r in wanted if not installed_here(r)]
    if not wanted:
        return image
    indexes = image.pip_indexes
    if index is not None:
        indexes = (*indexes, PipIndex(index, tuple(requirement_name(r) for r in wanted)))
    return replace(image, pip=(*image.pip, *wanted), pip_indexes=indexes)


def installed_here(requirement: str) -> bool:
    """Whether this environment has a distribution satisfying ``requirement``."""
    parsed = Requirement(requirement)
    try:
        version = importlib.metadata.version(parsed.name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return not parsed.specifier or parsed.specifier.contains(version.split("+")[0], prereleases=True)


def rendezvous_port(cluster: Cluster, salt: str) -> int:
    """A port for a framework's rendezvous on the head: on a local pool a port free on
    this machine now; on remote nodes one derived from the pool's id (the same for
    every node, different across pools), in 29500-31499."""
    if cluster.is_local:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])
    job = cluster.infos[0].job_id if cluster.infos else ""
    return PORT_BASE + int(hashlib.sha256(f"{job}:{salt}".encode()).hexdigest(), 16) % PORT_SPAN


def require_gpus(cluster: Cluster, what: str, fix: str) -> None:
    """ValueError naming the nodes that reported no NVIDIA GPU, when ``what`` needs one."""
    missing = cluster.nodes_without_gpu()
    if missing:
        where = "this machine (sky.Local() nodes have no GPU)" if cluster.is_local else (
            f"node{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
            f"({', '.join(cluster.nodes[i].address for i in missing)}): nvidia-smi found no NVIDIA GPU"
        )
        raise ValueError(f"{what} needs an NVIDIA GPU on every node, but {where}; {fix}")
