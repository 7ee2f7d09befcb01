"""``sky.plugins.jax``: JAX on every node, with ``jax.distributed`` initialized across them.

At open the plugin adds JAX to the Image (``jax[cuda12]`` on GPU nodes, plain ``jax``
on CPU nodes; a local pool adds it only when this environment lacks it) and picks the
coordinator: the head's address and a free port. Each node's agent process then calls
``jax.distributed.initialize(coordinator, num_processes=nodes, process_id=node)`` when
it starts (bounded by ``INIT_TIMEOUT``; CPU nodes use gloo for cross-process
collectives) and ``jax.distributed.shutdown()`` when it stops, so tasks see
``jax.process_count() == nodes`` and every node's devices. JAX allows one process per
node here: ``Worker(executor="process")`` is refused.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace

from skyward.core.instance import InstanceInfo
from skyward.core.validation import fail
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.plugins.packages import rendezvous_port, with_packages

INIT_TIMEOUT = 120
COORDINATOR = "SKYWARD_JAX_COORDINATOR"
CPU_COLLECTIVES = "SKYWARD_JAX_CPU_COLLECTIVES"


def jax(*, cuda: str = "cu124") -> Plugin:
    """JAX with ``jax.distributed`` across the pool (see the module docstring); ``cuda``
    names the CUDA major for GPU nodes ("cu12x" installs ``jax[cuda12]``)."""
    if not isinstance(cuda, str) or not (cuda.startswith("cu") and cuda[2:].isdigit() and len(cuda) >= 4):
        raise fail("plugins.jax", "cuda", cuda, 'use a CUDA variant such as "cu124" or "cu128"')
    extra = f"jax[cuda{cuda[2:4]}]"

    def transform(image: Image, cluster: Cluster) -> Image:
        if cluster.worker.resolved_executor == "process":
            raise ValueError(
                'plugins.jax() initializes jax.distributed once in each node\'s agent process, where tasks run '
                'with Worker(executor="thread"); Worker(executor="process") is not valid with it: use "thread"'
            )
        cpu = bool(cluster.nodes_without_gpu())
        image = with_packages(image, cluster, ["jax"] if cpu else [extra])
        env = {COORDINATOR: f"{cluster.head_addr}:{rendezvous_port(cluster, 'jax')}"}
        if cpu:
            env[CPU_COLLECTIVES] = "gloo"
        return replace(image, env={**image.env, **env})

    return Plugin.create("jax").with_image_transform(transform).with_around_app(distributed)


@contextlib.contextmanager
def distributed(info: InstanceInfo) -> Iterator[None]:
    """``jax.distributed`` joined for the agent process's lifetime."""
    import jax as jax_module

    if os.environ.get(CPU_COLLECTIVES):
        jax_module.config.update("jax_cpu_collectives_implementation", os.environ[CPU_COLLECTIVES])
    jax_module.distributed.initialize(
        os.environ[COORDINATOR], num_processes=info.total_nodes, process_id=info.node,
        initialization_timeout=INIT_TIMEOUT,
    )
    try:
        yield
    finally:
        jax_module.distributed.shutdown()
