"""The default ``torch.distributed`` process group that a plugin forms on every node.

``with_group(plugin, backend)`` adds the node hooks that do it (``sky.plugins.torch`` and
``sky.plugins.accelerate`` use them); ``placement(cluster, plugin)`` is the Image
environment that tells those hooks where the node's ranks live (an elastic pool is
refused: the group's size is fixed). Each worker process gets its rank
variables (``rank_env``) and joins the group (rank ``RANK`` of ``WORLD_SIZE``, rendezvous
at ``MASTER_ADDR:MASTER_PORT``) with ``backend``, else nccl where torch sees CUDA and
gloo otherwise, and destroys it when the process ends:

- ``Worker(executor="thread")`` (the default): the node's agent joins when it starts, so
  all nodes join together when the pool opens and a task sent to one node (``>>``) finds
  the group ready;
- ``Worker(executor="process")``: each executor child joins on its first task, so that
  first task must run on every worker at once (``f() @ pool``).

Every rank must arrive within ``INIT_TIMEOUT`` seconds, else ``TimeoutError`` names the
rendezvous; collectives afterwards keep torch's own timeout. While the group is held, a
task's ``init_process_group()`` is a no-op (a different ``backend`` is a ValueError) and
``destroy_process_group()`` of the default group is a no-op (the plugin destroys it when
the process ends); before it is formed, a named ``backend`` is ``init_process_group``'s
default.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import ModuleType
from typing import TYPE_CHECKING, Any

from skyward.core.instance import InstanceInfo
from skyward.core.validation import fail
from skyward.model.cluster import Cluster
from skyward.model.plugin import Plugin
from skyward.model.spec import Nodes

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

INIT_TIMEOUT = 120
JOIN_IN = "SKYWARD_TORCH_JOIN_IN"
"""Where a node's ranks join: "agent" (thread executor) or "task" (executor children)."""
_held = threading.Event()
"""Set while this process holds the plugin's group (a process has one default group)."""
_lock = threading.Lock()


def placement(cluster: Cluster, plugin: str) -> dict[str, str]:
    """The Image environment telling the node hooks where ranks join (see the module
    docstring); ValueError for an elastic pool, whose node count the group cannot follow."""
    nodes = Nodes.of(cluster.spec.nodes)
    if nodes.elastic:
        raise fail(
            "Spec", "nodes", cluster.spec.nodes,
            f"plugins.{plugin}() forms torch.distributed's group over a fixed number of nodes; "
            f"use a fixed count such as nodes={nodes.desired or 1}",
        )
    return {JOIN_IN: "task" if cluster.worker.resolved_executor == "process" else "agent"}


def with_group(plugin: Plugin, backend: str | None) -> Plugin:
    """``plugin`` with the node hooks that form the group (see the module docstring)."""

    @contextlib.contextmanager
    def agent(info: InstanceInfo) -> Iterator[None]:
        os.environ.update(rank_env(info))
        with owned(backend):
            if os.environ.get(JOIN_IN) != "agent":
                yield
                return
            with joined(pick_backend(backend)):
                yield

    @contextlib.contextmanager
    def child(info: InstanceInfo) -> Iterator[None]:
        os.environ.update(rank_env(info))
        with owned(backend):
            try:
                yield
            finally:
                leave()

    def join_first(fn: Callable[..., object]) -> Callable[..., object]:
        if os.environ.get(JOIN_IN) != "task":
            return fn

        @functools.wraps(fn)
        def joined_then_run(*args: object, **kwargs: object) -> object:
            _check_child_rank(plugin.name)
            join(pick_backend(backend))
            return fn(*args, **kwargs)

        return joined_then_run

    return plugin.with_around_app(agent).with_around_process(child).with_decorator(join_first)


def rank_env(info: InstanceInfo) -> dict[str, str]:
    """The rank variables of a worker (one process per worker: ``workers_per_node`` per node)."""
    return {
        "WORLD_SIZE": str(info.total_workers),
        "RANK": str(info.global_worker_index),
        "LOCAL_RANK": str(info.worker),
        "LOCAL_WORLD_SIZE": str(info.workers_per_node),
        "NODE_RANK": str(info.node),
    }


def pick_backend(backend: str | None) -> str:
    """``backend``, else nccl where torch sees a CUDA device and gloo otherwise."""
    if backend is not None:
        return backend
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def join(backend: str) -> bool:
    """Form the group in this process unless it has one already; True when this call formed it.

    TimeoutError when the other ranks do not all arrive within ``INIT_TIMEOUT``."""
    import torch.distributed as dist

    with _lock:
        if _held.is_set() or dist.is_initialized():
            return False
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        try:
            store = dist.TCPStore(
                address, port, world, is_master=rank == 0, timeout=timedelta(seconds=INIT_TIMEOUT),
                wait_for_workers=True,
            )
        except dist.DistError as exc:
            raise TimeoutError(
                f"torch.distributed: rank {rank} (node {os.environ.get('NODE_RANK', '?')}) waited "
                f"{INIT_TIMEOUT}s for the other ranks of the group (world size {world}) at {address}:{port}, "
                'and they did not all arrive. Every worker must join: with Worker(executor="process") the '
                "group forms on each executor child's first task, so run that task on every node at once "
                "(f() @ pool)"
            ) from exc
        _gloo_interface(address)
        _original(dist, "init_process_group")(backend=backend, store=store, rank=rank, world_size=world)
        store.set_timeout(dist.constants.default_pg_timeout)
        _held.set()
        return True


def _gloo_interface(address: str) -> None:
    """Point gloo at the network interface this node reaches the rendezvous ``address``
    by, unless ``GLOO_SOCKET_IFNAME`` names one already. Left alone, gloo binds to the
    address the host name resolves to, which on many hosts (Debian's ``127.0.1.1`` line,
    a VM's or a container's ``127.0.0.1``) is a loopback address: each rank then tells the
    others to connect to their own loopback and the group never forms."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return
    import socket

    import psutil

    try:
        family, kind, _, _, target = socket.getaddrinfo(address, 1, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind) as probe:
            probe.connect(target)  # UDP: picks the route, sends nothing
            local = str(probe.getsockname()[0])
    except OSError:
        return
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == local for a in addresses):
            os.environ["GLOO_SOCKET_IFNAME"] = name
            return


def leave() -> None:
    """Destroy the plugin's group, if this process holds it."""
    import torch.distributed as dist

    with _lock:
        if _held.is_set() and dist.is_initialized():
            _original(dist, "destroy_process_group")()
        _held.clear()


@contextlib.contextmanager
def joined(backend: str) -> Iterator[None]:
    """The group formed for the block's duration (see ``join``), destroyed after."""
    formed = join(backend)
    try:
        yield
    finally:
        if formed:
            leave()


@contextlib.contextmanager
def owned(backend: str | None) -> Iterator[None]:
    """``init_process_group``/``destroy_process_group`` fitted to the plugin's group (see
    the module docstring) for the block's duration."""
    import torch.distributed as dist

    init, destroy = dist.init_process_group, dist.destroy_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> None:  # torch's own, passed through
        wanted = args[0] if args else kwargs.get("backend")
        if _held.is_set():
            current = str(dist.get_backend())
            if wanted is not None and str(wanted).lower() not in current.lower():
                raise ValueError(
                    f"init_process_group(backend={wanted!r}): skyward already formed this node's group "
                    f"with backend {current!r}; leave backend out, or name it in the plugin "
                    f"(sky.plugins.torch(backend={wanted!r}))"
                )
            return
        if wanted is None and backend is not None:
            kwargs["backend"] = backend
        init(*args, **kwargs)

    def destroy_process_group(group: ProcessGroup | None = None) -> None:
        if group is None and _held.is_set():
            return
        destroy(group)

    init_process_group.skyward_original = init  # type: ignore[attr-defined]
    destroy_process_group.skyward_original = destroy  # type: ignore[attr-defined]
    dist.init_process_group = init_process_group
    dist.destroy_process_group = destroy_process_group
    try:
        yield
    finally:
        dist.init_process_group = init
        dist.destroy_process_group = destroy


def _original(dist: ModuleType, name: str) -> Callable[..., object]:
    """torch's own ``dist.<name>``, under the wrappers ``owned`` may have put there."""
    fn: Callable[..., object] = getattr(dist, name)
    while (original := getattr(fn, "skyward_original", None)) is not None:
        fn = original
    return fn


def _check_child_rank(plugin: str) -> None:
    """ValueError when this executor child has no rank of its own (more children than workers)."""
    worker, workers = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    if worker >= workers:
        raise ValueError(
            f"plugins.{plugin}: executor child {worker} of node {os.environ['NODE_RANK']} has no rank in "
            f"torch.distributed's group ({workers} per node); use Worker(executor=\"process\", "
            f"concurrency={workers}) or the default thread executor"
        )
