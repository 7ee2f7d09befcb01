"""Which engine serves collections in this process.

- A node agent installs its pool's ``CollectionsConfig`` (``install_node``); its tasks
  then use a ``LocalEngine`` of this process.
- An executor child installs the config and its ``ChildBridge`` (``install_child``); its
  tasks use a ``BridgeEngine`` that forwards to the agent.
- The client gets a ``LocalEngine`` per open pool (``client_engine``), stopped by
  ``release`` when the pool closes, which also kills the pool's host actors; the
  client of an SSH pool gets the provider's forwarding engine instead
  (``skyward.cluster.remote_collections``).
"""

from __future__ import annotations

import threading
from typing import Any

from skyward.collections.config import DISABLED, NAMESPACE, CollectionsConfig
from skyward.collections.lock import forget_task
from skyward.errors import NoActivePoolError

_node: CollectionsConfig | None = None
_child_engine: Any = None
_engines: dict[str, Any] = {}
_lock = threading.Lock()


def install_node(config: CollectionsConfig | None) -> None:
    """Called by a node agent at start: this process serves the pool of ``config``."""
    global _node
    _node = config


def install_child(config: CollectionsConfig | None, bridge: Any) -> None:
    """Called by an executor child: its collections go through ``bridge`` to its agent."""
    global _node, _child_engine
    from skyward.collections.bridge import BridgeEngine

    _node = config
    _child_engine = BridgeEngine(bridge)


def on_node() -> bool:
    """True in a node agent or executor child (a config was installed)."""
    return _node is not None


def node_engine() -> Any:
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


def client_engine(options: Any, config: CollectionsConfig | None, provider: str, remote: Any = None) -> Any:
    """The client's engine for an open pool with ``options`` and ``config``; ``remote``
    (a provider whose client is not a Ray driver, e.g. SSH) makes the engine that
    forwards to the cluster."""
    if not options.collections_enabled or (config is not None and not config.enabled):
        raise RuntimeError(DISABLED)
    if remote is not None:
        return remote()
    if config is None:
        raise NotImplementedError(f"the {provider} provider does not support distributed collections yet")
    return _local_engine(config, "client")


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


def _local_engine(config: CollectionsConfig, where: str) -> Any:
    engine = _engines.get(config.pool_id)
    if engine is None:
        from skyward.collections.engine import LocalEngine

        with _lock:
            engine = _engines.get(config.pool_id)
            if engine is None:
                engine = _engines[config.pool_id] = LocalEngine(config, where)
    return engine


def _node_rank() -> int:
    from skyward.runtime import instance_info

    info = instance_info()
    return -1 if info is None else info.node
