"""Which collection host actors of a pool were ever created, recorded in Ray's GCS
key-value store, which outlives the actors.

A host that died (its process crashed, was killed, ran out of memory) takes its
collections with it. Without this record the next process to touch one of its names
would create a fresh, empty host under the same name and carry on with silently empty
state; with it, every process that asks for a host that existed once and is gone gets
``CollectionUnavailableError`` until the pool is reopened. ``forget`` drops a pool's
record when it closes.
"""

from __future__ import annotations

from skyward.collections.config import NAMESPACE, CollectionsConfig


def _key(config: CollectionsConfig, index: int | None = None) -> str:
    prefix = f"skyward:{config.pool_id}:collections-created:"
    return prefix if index is None else f"{prefix}{index}"


def mark_created(config: CollectionsConfig, index: int) -> None:
    """Called by host ``index`` as it starts."""
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(_key(config, index), b"1", namespace=NAMESPACE)


def was_created(config: CollectionsConfig, index: int) -> bool:
    """True once host ``index`` of the pool has started, alive or not now."""
    from ray.experimental.internal_kv import _internal_kv_exists

    return bool(_internal_kv_exists(_key(config, index), namespace=NAMESPACE))


def forget(config: CollectionsConfig) -> None:
    """Drop the pool's record (it is closing; its hosts are killed)."""
    from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_initialized

    if _internal_kv_initialized():
        _internal_kv_del(_key(config), del_by_prefix=True, namespace=NAMESPACE)
