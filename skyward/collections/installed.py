"""Which engine serves collections in this process.

- A node agent installs its pool's ``CollectionsConfig`` (``install_node``); its tasks
  then use a ``LocalEngine`` of this process.
- An executor child installs the config and its ``ChildBridge`` (``install_child``); its
  tasks use a ``ForwardingEngine`` that forwards to the agent (``gateway``).
- A client that is a Ray driver of its pool (local and ``sky.Ray`` pools) gets a
  ``LocalEngine`` per open pool through ``DriverCollections``, stopped when the pool
  closes, which also kills the pool's host actors. The client of a remote pool gets a
  ``ForwardingEngine`` to the head node's agent instead (see the SSH provider).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from skyward.collections import lineage
from skyward.collections.config import DISABLED, NAMESPACE, CollectionsConfig
from skyward.collections.lock import forget_task
from skyward.collections.operations import Engine
from skyward.core.errors import NoActivePoolError
from skyward.core.instance import instance_info

if TYPE_CHECKING:
    from skyward.collections.bridge import ChildBridge
    from skyward.collections.engine import LocalEngine

_node: CollectionsConfig | None = None
_child_engine: Engine | None = None
_engines: dict[str, LocalEngine] = {}
_lock = threading.Lock()


def install_node(config: CollectionsConfig | None) -> None:
    """Called by a node agent at start: this process serves the pool of ``config``."""
    global _node
    _node = config


def install_child(config: CollectionsConfig | None, bridge: ChildBridge) -> None:
    """Called by an executor child: its collections go through ``bridge`` to its agent."""
    global _node, _child_engine
    _node = config
    _child_engine = bridge.engine()


def on_node() -> bool:
    """True in a node agent or executor child (a config was installed)."""
    return _node is not None


def node_engine() -> Engine:
    """The engine of this node process. RuntimeError when the pool runs with
    ``Options(cluster=False)``; NoActivePoolError off a node."""
    config = _node
    if config is None:
        raise NoActivePoolError("this process is not a node of a pool")
    if not config.enabled:
        raise RuntimeError(DISABLED)
    if _child_engine is not None:
        return _child_engine
    return _local_engine(config, str(_node_rank()))


class DriverCollections:
    """The client's side of the collections of a pool whose client is a Ray driver."""

    def __init__(self, config: CollectionsConfig) -> None:
        self.config = config

    def engine(self) -> LocalEngine:
        """This process's engine for the pool (RuntimeError with ``cluster=False``)."""
        if not self.config.enabled:
            raise RuntimeError(DISABLED)
        return _local_engine(self.config, "client")

    def membership_changed(self, left: int | None, reason: str) -> None:
        """The pool's nodes changed (see ``CollectionHost.membership_changed``)."""
        if self.config.enabled:
            from skyward.collections.steps import run

            run(self.engine().pool_membership_changed(left, reason))

    def release(self) -> None:
        """The pool closes: stop this process's engine, kill the pool's host actors."""
        release(self.config)


def end_task(task_id: str, ok: bool) -> None:
    """Called by a node agent after each task: free what the task's holders still hold."""
    config = _node
    if config is None or not config.enabled:
        return
    forget_task(task_id)
    engine = _engines.get(config.pool_id)
    if engine is not None:
        engine.end_task(task_id, ok)


def release(config: CollectionsConfig) -> None:
    """Called when a pool closes, in the client: stop its engine, kill its host actors."""
    with _lock:
        engine = _engines.pop(config.pool_id, None)
    if engine is not None:
        engine.close()
    import ray

    if not ray.is_initialized():
        return
    for index in range(config.hosts):
        try:
            ray.kill(ray.get_actor(config.host_name(index), namespace=NAMESPACE), no_restart=True)
        except ValueError:  # never created
            pass
    lineage.forget(config)


def _local_engine(config: CollectionsConfig, where: str) -> LocalEngine:
    engine = _engines.get(config.pool_id)
    if engine is None:
        from skyward.collections.engine import LocalEngine

        with _lock:
            engine = _engines.get(config.pool_id)
            if engine is None:
                engine = _engines[config.pool_id] = LocalEngine(config, where)
    return engine


def _node_rank() -> int:
    info = instance_info()
    return -1 if info is None else info.node
