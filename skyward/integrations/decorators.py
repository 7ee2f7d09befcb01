"""Per-function setup of a distributed framework, run on the node at each call:
``@sky.integrations.torch(backend="gloo")`` above ``@sky.function``.

Each decorator wraps the function (a ``@sky.function`` stays one) so that, inside a
task, the framework is set up from ``sky.instance_info()`` before the body runs:

- ``torch(backend=)``: the rendezvous variables (``MASTER_ADDR`` = the head,
  ``MASTER_PORT`` derived from the pool's id, ``RANK``, ``WORLD_SIZE``, ...), then
  ``torch.distributed.init_process_group(backend)`` unless already initialized (it stays
  initialized for later calls in the same process).
- ``transformers(backend=)``: the same (``Trainer`` reads those variables).
- ``jax()``: ``jax.distributed.initialize`` across the nodes (once per process).
- ``keras(backend=)``: ``KERAS_BACKEND`` (before Keras is first imported there).
- ``tensorflow()``: ``TF_CONFIG`` naming every node as a worker.

Every call must run on all nodes at once (``@``), as the frameworks' rendezvous waits
for every rank. The plugins (``sky.plugins.torch()`` & co.) do the same per pool.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar, overload

from skyward.core.function import SkywardFunction
from skyward.core.instance import InstanceInfo, instance_info
from skyward.core.validation import check_choice
from skyward.plugins.torch_group import rank_env

PORT_BASE = 29500
PORT_SPAN = 2000
P = ParamSpec("P")
R = TypeVar("R")


class Decorator:
    """Wraps a function (or a ``@sky.function``, which stays one) so that the framework
    is set up from ``sky.instance_info()`` before each call's body runs."""

    def __init__(self, setup: Callable[[InstanceInfo], None]) -> None:
        self._setup = setup

    @overload
    def __call__(self, fn: SkywardFunction[R]) -> SkywardFunction[R]: ...

    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: object) -> object:
        if isinstance(fn, SkywardFunction):
            return SkywardFunction(_with_setup(fn.local, self._setup), fn.timeout)
        if not callable(fn):
            raise TypeError(f"sky.integrations decorators take a function, got {type(fn).__name__} {fn!r}")
        return _with_setup(fn, self._setup)


def torch(backend: str | None = None) -> Decorator:
    """Run the function with ``torch.distributed`` initialized across the pool."""
    if backend is not None:
        check_choice("integrations.torch", "backend", backend, ("gloo", "nccl"))
    return _decorator(lambda info: _torch_setup(info, backend))


def transformers(backend: str | None = None) -> Decorator:
    """Run the function with the distributed environment ``transformers.Trainer`` reads."""
    if backend is not None:
        check_choice("integrations.transformers", "backend", backend, ("gloo", "nccl"))
    return _decorator(lambda info: _torch_setup(info, backend))


def jax() -> Decorator:
    """Run the function with ``jax.distributed`` initialized across the pool."""
    return _decorator(_jax_setup)


def keras(backend: str = "jax") -> Decorator:
    """Run the function with Keras using ``backend`` ("jax", "torch" or "tensorflow")."""
    check_choice("integrations.keras", "backend", backend, ("jax", "torch", "tensorflow"))
    return _decorator(lambda info: _keras_setup(backend))


def tensorflow() -> Decorator:
    """Run the function with ``TF_CONFIG`` describing every node as a worker."""
    return _decorator(_tensorflow_setup)


def _decorator(setup: Callable[[InstanceInfo], None]) -> Decorator:
    return Decorator(setup)


def _with_setup(fn: Callable[P, R], setup: Callable[[InstanceInfo], None]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        info = instance_info()
        if info is None:
            raise RuntimeError(
                f"{getattr(fn, '__qualname__', fn)} uses a sky.integrations decorator, which sets the framework up "
                "on a pool's node: run it there (`f() @ pool`)"
            )
        setup(info)
        return fn(*args, **kwargs)

    return wrapped


def port_for(info: InstanceInfo, salt: str) -> int:
    """A rendezvous port derived from the pool's id (the same on every node)."""
    return PORT_BASE + int(hashlib.sha256(f"{info.job_id}:{salt}".encode()).hexdigest(), 16) % PORT_SPAN


def _torch_setup(info: InstanceInfo, backend: str | None) -> None:
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", info.head_addr)
    os.environ.setdefault("MASTER_PORT", str(port_for(info, "torch")))
    os.environ.update(rank_env(info))
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)


def _jax_setup(info: InstanceInfo) -> None:
    import jax as jax_module
    from jax._src import distributed

    if distributed.global_state.client is not None:
        return
    if info.accelerator is None:
        jax_module.config.update("jax_cpu_collectives_implementation", "gloo")
    jax_module.distributed.initialize(
        f"{info.head_addr}:{port_for(info, 'jax')}", num_processes=info.total_nodes, process_id=info.node,
    )


def _keras_setup(backend: str) -> None:
    import sys

    keras_module = sys.modules.get("keras")
    if keras_module is not None and keras_module.backend.backend() != backend:
        raise RuntimeError(
            f"keras is already loaded with the {keras_module.backend.backend()!r} backend in this process; "
            f"integrations.keras(backend={backend!r}) must set it before keras is first imported"
        )
    os.environ["KERAS_BACKEND"] = backend


def _tensorflow_setup(info: InstanceInfo) -> None:
    base = port_for(info, "tensorflow")
    workers = [f"{peer.private_ip}:{base + peer.node}" for peer in info.peers]
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": info.node}})
