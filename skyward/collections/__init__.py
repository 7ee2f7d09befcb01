"""Distributed collections: dict, set, counter, queue, barrier and lock shared by every
node of a pool, backed by Ray actors (see docs/collections.md).

Layout: ``factories`` (``sky.dict`` & co., ``pool.dict`` & co.) build proxies
(``shared_dict``, ``shared_set``, ``counter``, ``work_queue``, ``barrier``, ``lock``)
over an ``operations.Operations`` (``local_operations`` in Ray processes, ``bridge`` in
executor children, chosen by ``runtime``; both run operations written once as ``steps``,
run blocking or awaited). The local operations call the pool's hosts (``actors``: one
actor holding every shard, each shard one ``entities`` object per collection it owns,
placed by ``placement``; ``remote`` types its handles and what travels to it) directly
for "strong" operations (on a local pool those that never wait by the shard's Unix socket,
``host_lane``) and through the node cache (``cache``, fed by ``subscriptions`` on the
hosts, on a ``loop`` thread) for "eventual" ones; ``keeper`` keeps lock and barrier
leases alive. ``config`` holds the layout and the timing every process shares.
"""

from __future__ import annotations

from skyward.collections.barrier import SharedBarrier
from skyward.collections.config import DISABLED, CollectionsConfig
from skyward.collections.counter import SharedCounter
from skyward.collections.errors import BrokenBarrierError, CollectionUnavailableError, StaleFenceError
from skyward.collections.factories import PoolCollections, barrier, counter, lock, queue, shared_dict, shared_set
from skyward.collections.lock import SharedLock
from skyward.collections.shared_dict import SharedDict
from skyward.collections.shared_set import SharedSet
from skyward.collections.work_queue import SharedQueue

__all__ = [
    "DISABLED", "BrokenBarrierError", "CollectionUnavailableError", "CollectionsConfig", "PoolCollections",
    "SharedBarrier", "SharedCounter", "SharedDict", "SharedLock", "SharedQueue", "SharedSet", "StaleFenceError",
    "barrier", "counter", "lock", "queue", "shared_dict", "shared_set",
]
