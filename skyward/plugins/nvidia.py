"""NVIDIA GPU plugins: ``cuml`` (RAPIDS cuML), ``mig`` (Multi-Instance GPU partitions,
one per worker) and ``mps`` (the Multi-Process Service, GPU sharing between processes).

All three need an NVIDIA GPU on every node: at open they read the nodes' facts (remote
hosts report their GPUs with ``nvidia-smi``; local nodes have none) and refuse a pool
whose nodes lack one, naming the nodes. They have not been run on a GPU by skyward's
own tests: what they do there is described per factory below.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace

from skyward.core.accelerator_catalog import CATALOG, identify, nearest_variant
from skyward.core.instance import InstanceInfo
from skyward.core.private_dir import private_directory
from skyward.core.validation import check_number, fail
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.plugins.packages import require_gpus, with_packages

NVIDIA_INDEX = "https://pypi.nvidia.com"
SMI_TIMEOUT = 30.0
MIG_PROFILES = tuple(sorted({p.name for m in CATALOG for v in m.variants for p in v.mig}))
_MIG_DEVICE = re.compile(r"MIG\s+(\S+)\s+Device\s+\d+:\s+\(UUID:\s+(MIG-[^)\s]+)\)")


def cuml(*, cuda: str = "cu12") -> Plugin:
    """RAPIDS cuML (``cuml-cu12`` from NVIDIA's index) on GPU nodes; import ``cuml`` in tasks."""
    if cuda not in ("cu11", "cu12", "cu13"):
        raise fail("plugins.cuml", "cuda", cuda, 'use "cu12" (or "cu11", "cu13"), the CUDA major of the nodes')

    def transform(image: Image, cluster: Cluster) -> Image:
        require_gpus(cluster, f"plugins.cuml(cuda={cuda!r})", "use GPU nodes (Spec.accelerator) or scikit-learn")
        return with_packages(image, cluster, [f"cuml-{cuda}"], NVIDIA_INDEX)

    return Plugin.create("cuml").with_image_transform(transform)


def mig(profile: str) -> Plugin:
    """Split each node's GPUs into MIG instances of ``profile`` ("3g.40gb"), one per worker.

    At open: every node's GPU must support ``profile`` (the catalog's MIG tables), the
    pool must use ``Worker(executor="process")`` with at most one task slot per
    instance. Bootstrap: MIG mode on and the instances created (``nvidia-smi``, with
    ``sudo -n`` for a non-root user) unless they exist. Each node then reports
    ``workers_per_node`` = instances per GPU x GPUs, and each executor child sees only
    its own instance (``CUDA_VISIBLE_DEVICES``, by the child's worker index)."""
    if profile not in MIG_PROFILES:
        raise fail("plugins.mig", "profile", profile, f"use a MIG profile such as {', '.join(MIG_PROFILES[:6])}, ...")

    def per_gpu(cluster: Cluster) -> dict[int, int]:
        counts = {}
        for info in cluster.infos:
            assert info.accelerator is not None
            variant = None
            seen = identify(info.accelerator.type)
            if seen is not None and info.accelerator.memory_gb:
                variant = nearest_variant(seen.model, info.accelerator.memory_gb)
            fits = {p.name: p.workers_per_gpu for p in (variant.mig if variant else ())}
            if profile not in fits:
                offered = ", ".join(fits) or "none (it does not support MIG)"
                raise ValueError(
                    f"plugins.mig({profile!r}) does not fit node {info.node}: its GPU is {info.accelerator.type} "
                    f"({info.accelerator.memory_gb} GB), whose MIG profiles are {offered}; pick one of those"
                )
            counts[info.node] = fits[profile] * int(info.accelerator.count)
        return counts

    def transform(image: Image, cluster: Cluster) -> Image:
        require_gpus(cluster, f"plugins.mig({profile!r})", "use nodes with a MIG-capable GPU (A100, H100, ...)")
        counts = per_gpu(cluster)
        if cluster.worker.resolved_executor != "process":
            raise ValueError(
                f'plugins.mig({profile!r}) gives each executor child its own MIG instance: use '
                f'sky.Worker(executor="process", concurrency={min(counts.values())})'
            )
        if cluster.worker.concurrency > min(counts.values()):
            raise ValueError(
                f"Worker.concurrency={cluster.worker.concurrency} is more than the {min(counts.values())} "
                f"{profile} instances a node has; lower it"
            )
        return image

    def bootstrap(cluster: Cluster) -> tuple[str, ...]:
        per = per_gpu(cluster)[0] // max(1, int(cluster.infos[0].accelerator.count))  # type: ignore[union-attr]
        wanted = ",".join([profile] * per)
        sudo = '$( [ "$(id -u)" -eq 0 ] || echo sudo -n )'
        return (
            f"{sudo} nvidia-smi -mig 1 >/dev/null",
            f'[ "$(nvidia-smi -L | grep -c "MIG {profile}")" -ge {per} ] || {sudo} nvidia-smi mig -cgi {wanted} -C',
        )

    def workers(info: InstanceInfo) -> int:
        table = {p.name: p.workers_per_gpu for m in CATALOG for v in m.variants for p in v.mig}
        return table[profile] * max(1, int(info.accelerators))

    return (
        Plugin.create("mig")
        .with_image_transform(transform)
        .with_bootstrap(bootstrap)
        .with_workers_per_node(workers)
        .with_around_process(lambda info: _mig_device(info, profile))
    )


@contextlib.contextmanager
def _mig_device(info: InstanceInfo, profile: str) -> Iterator[None]:
    """Show this executor child only MIG instance number ``info.worker`` of ``profile``."""
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=SMI_TIMEOUT).stdout
    devices = [uuid for name, uuid in _MIG_DEVICE.findall(listing) if name == profile]
    if info.worker >= len(devices):
        raise RuntimeError(
            f"node {info.node} has {len(devices)} MIG {profile} instances but worker {info.worker} needs one; "
            "check `nvidia-smi -L` on the node"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = devices[info.worker]
    yield


def mps(*, active_thread_percentage: int | None = None, pinned_memory_limit: str | None = None) -> Plugin:
    """Run the CUDA Multi-Process Service on each node while its agent lives, so
    concurrent tasks share the GPU. ``active_thread_percentage`` (1-100) caps each
    client's share of the GPU's threads; ``pinned_memory_limit`` ("4G", or per device
    "0=4G,1=2G") caps each client's device memory. The daemon's pipe and log live in
    ``/tmp/skyward-mps-<job>-<node>``, made 0700 (``private_directory``: one that another
    user could control is refused)."""
    check_number("plugins.mps", "active_thread_percentage", active_thread_percentage,
                 minimum=1, maximum=100, integer=True, optional=True)
    if pinned_memory_limit is not None and not (
        isinstance(pinned_memory_limit, str) and re.fullmatch(r"(\d+=)?\d+[MG](,\d+=\d+[MG])*", pinned_memory_limit)
    ):
        raise fail("plugins.mps", "pinned_memory_limit", pinned_memory_limit, 'use a size such as "4G" or "0=4G,1=2G"')

    def transform(image: Image, cluster: Cluster) -> Image:
        require_gpus(cluster, "plugins.mps()", "use GPU nodes (Spec.accelerator)")
        env = {}
        if active_thread_percentage is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(active_thread_percentage)
        if pinned_memory_limit is not None:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = pinned_memory_limit if "=" in pinned_memory_limit else ",".join(
                f"{gpu}={pinned_memory_limit}" for gpu in range(int(max(i.accelerators for i in cluster.infos)))
            )
        return replace(image, env={**image.env, **env})

    return Plugin.create("mps").with_image_transform(transform).with_around_app(_mps_daemon)


@contextlib.contextmanager
def _mps_daemon(info: InstanceInfo) -> Iterator[None]:
    """An MPS control daemon for this node's agent and its children, stopped with the agent."""
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        raise RuntimeError(f"node {info.node} has no nvidia-cuda-mps-control (the NVIDIA driver's MPS); install it")
    root = f"/tmp/skyward-mps-{info.job_id[:12]}-{info.node}"
    env = {"CUDA_MPS_PIPE_DIRECTORY": f"{root}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{root}/log"}
    for path in (root, *env.values()):
        private_directory(path)
    os.environ.update(env)
    subprocess.run([control, "-d"], check=True, timeout=SMI_TIMEOUT, env=os.environ.copy())
    try:
        yield
    finally:
        subprocess.run([control], input="quit\n", text=True, timeout=SMI_TIMEOUT, env=os.environ.copy())
        shutil.rmtree(root, ignore_errors=True)


