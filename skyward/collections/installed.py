"""Whose operations serve collections in this process.

- A node agent installs its pool's ``CollectionsConfig`` (``install_node``); its tasks
  then use a ``LocalOperations`` of this process.
- An executor child installs the config and its ``ChildBridge`` (``install_child``); its
  tasks use a ``ForwardingOperations`` that forwards to the agent (``gateway``).
- A client that is a Ray driver of its pool (local and ``sky.Ray`` pools) gets a
  ``LocalOperations`` per open pool through ``DriverCollections``, stopped when the pool
  closes, which also kills the pool's hosts actor. The client of a remote pool gets a
  ``ForwardingOperations`` to the head node's agent instead (see the SSH provider).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import TYPE_CHECKING

from skyward.collections.config import DISABLED, NAMESPACE, CollectionsConfig
from skyward.collections.errors import CollectionUnavailableError
from skyward.collections.host_lane import lane_path
from skyward.collections.lock import forget_task
from skyward.collections.operations import Operations
from skyward.core.errors import NoActivePoolError
from skyward.core.instance import instance_info

if TYPE_CHECKING:
    from skyward.collections.bridge import ChildBridge
    from skyward.collections.local_operations import LocalOperations
    from skyward.collections.remote import HostsHandle

_node: CollectionsConfig | None = None
_child_operations: Operations | None = None
_operations_by_pool: dict[str, LocalOperations] = {}
_lock = threading.Lock()


def install_node(config: CollectionsConfig | None) -> None:
    """Called by a node agent at start: this process serves the pool of ``config``."""
    global _node
    _node = config


def install_child(config: CollectionsConfig | None, bridge: ChildBridge) -> None:
    """Called by an executor child: its collections go through ``bridge`` to its agent."""
    global _node, _child_operations
    _node = config
    _child_operations = bridge.operations()


def on_node() -> bool:
    """True in a node agent or executor child (a config was installed)."""
    return _node is not None


def node_operations() -> Operations:
    """The operations of this node process. RuntimeError when the pool runs with
    ``Options(cluster=False)``; NoActivePoolError off a node."""
    config = _node
    if config is None:
        raise NoActivePoolError("this process is not a node of a pool")
    if not config.enabled:
        raise RuntimeError(DISABLED)
    if _child_operations is not None:
        return _child_operations
    return _local_operations(config, str(_node_rank()))


class DriverCollections:
    """The client's side of the collections of a pool whose client is a Ray driver.
    ``owned``: the pool's hosts, where this process started them without ``detached``;
    held until the pool closes, since Ray ends such an actor once no handle to it is left."""

    def __init__(self, config: CollectionsConfig, owned: HostsHandle | None = None) -> None:
        self.config = config
        self._owned = owned

    def operations(self) -> LocalOperations:
        """This process's operations for the pool (RuntimeError with ``cluster=False``)."""
        if not self.config.enabled:
            raise RuntimeError(DISABLED)
        return _local_operations(self.config, "client")

    def membership_changed(self, left: int | None, reason: str) -> None:
        """The pool's nodes changed (see ``CollectionShard.membership_changed``)."""
        if self.config.enabled:
            from skyward.collections.steps import run

            run(self.operations().pool_membership_changed(left, reason))

    def release(self) -> None:
        """The pool closes: stop this process's operations, kill the pool's hosts."""
        release(self.config)
        self._owned = None

    def results_arrived(self) -> None:
        """A task's result came back: the client's next eventual read of each slot asks
        its owner (``NodeCache.results_arrived``)."""
        operations = _operations_by_pool.get(self.config.pool_id)
        if operations is not None:
            operations.results_arrived()


def writes_lost() -> int:
    """Called by a node agent as a task starts: the mark to give ``end_task``."""
    config = _node
    operations = None if config is None else _operations_by_pool.get(config.pool_id)
    return 0 if operations is None else operations.writes_lost()


def end_task(task_id: str, ok: bool, writes_lost_at_start: int) -> CollectionUnavailableError | None:
    """Called by a node agent after each task: free what the task's holders still hold,
    and wait until this node's eventual writes are applied. Returns the error to fail
    the task with when writes this node made while it ran were lost (``settle_writes``)."""
    config = _node
    if config is None or not config.enabled:
        return None
    forget_task(task_id)
    operations = _operations_by_pool.get(config.pool_id)
    if operations is None:
        return None
    operations.end_task(task_id, ok)
    try:  # before the result leaves: who gets it reads the task's writes
        operations.settle_writes(writes_lost_at_start)
    except CollectionUnavailableError as lost:
        return lost
    return None


def start_hosts_if_enabled(config: CollectionsConfig, detached: bool) -> HostsHandle | None:
    """Called by a process of the pool that is a Ray driver as it starts the pool's agents,
    before any task: begin starting its collections' hosts beside them
    (``actors.start_hosts``; no other process starts them). Returns their handle, or None
    when the pool runs with ``Options(cluster=False)``."""
    if not config.enabled:
        return None
    from skyward.collections.actors import start_hosts

    return start_hosts(config, detached)


def settle_hosts(hosts: HostsHandle | None, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``hosts`` (``start_hosts_if_enabled``'s) to
    answer: a pool opened with its hosts still starting would share the CPU with its first
    tasks (100-400 ms of a process's start on 2 cores). A host that failed to start is left
    for the first collection operation to report, as it was when nothing waited."""
    if hosts is None:
        return
    import ray

    with contextlib.suppress(Exception):
        ray.get(hosts.__ray_ready__.remote(), timeout=timeout)


def release(config: CollectionsConfig) -> None:
    """Called when a pool closes, in the client: stop its operations, kill its hosts
    and remove their lanes' socket paths."""
    with _lock:
        operations = _operations_by_pool.pop(config.pool_id, None)
    if operations is not None:
        operations.close()
    import ray

    if not ray.is_initialized():
        return
    with contextlib.suppress(ValueError):  # never created
        ray.kill(ray.get_actor(config.hosts_name, namespace=NAMESPACE), no_restart=True)
    for index in range(config.hosts):
        if path := lane_path(config.lanes_dir, config.pool_id, index):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _local_operations(config: CollectionsConfig, where: str) -> LocalOperations:
    operations = _operations_by_pool.get(config.pool_id)
    if operations is None:
        from skyward.collections.local_operations import LocalOperations

        with _lock:
            operations = _operations_by_pool.get(config.pool_id)
            if operations is None:
                operations = _operations_by_pool[config.pool_id] = LocalOperations(config, where)
    return operations


def _node_rank() -> int:
    info = instance_info()
    return -1 if info is None else info.node
