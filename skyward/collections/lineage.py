"""Whether a pool's collection hosts were ever created, recorded in Ray's GCS key-value
store, which outlives the actor.

Hosts that died (their process crashed, was killed, ran out of memory) take their
collections with them. Without this record the next process to touch a collection would
create fresh, empty hosts under the same name and carry on with silently empty state;
with it, every process that asks for hosts that existed once and are gone gets
``CollectionUnavailableError`` until the pool is reopened. ``forget`` drops a pool's
record when it closes.
"""

from __future__ import annotations

from skyward.collections.config import NAMESPACE, CollectionsConfig


def _key(config: CollectionsConfig) -> str:
    return f"skyward:{config.pool_id}:collections-created"


def mark_created(config: CollectionsConfig) -> None:
    """Called by the pool's hosts as they start."""
    from ray.experimental.internal_kv import _internal_kv_put

    _internal_kv_put(_key(config), b"1", namespace=NAMESPACE)


def was_created(config: CollectionsConfig) -> bool:
    """True once the pool's hosts have started, alive or not now."""
    from ray.experimental.internal_kv import _internal_kv_exists

    return bool(_internal_kv_exists(_key(config), namespace=NAMESPACE))


def forget(config: CollectionsConfig) -> None:
    """Drop the pool's record (it is closing; its hosts are killed)."""
    from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_initialized

    if _internal_kv_initialized():
        _internal_kv_del(_key(config), namespace=NAMESPACE)
