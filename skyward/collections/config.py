"""How a pool's collections are laid out and the settings every process shares: the
Ray actors that hold them and their names, the consistency levels, the lease timing.

Every process of a pool (client, node agents, executor children) derives the same
layout from one ``CollectionsConfig``, so a collection name means the same actor
everywhere.
"""

from __future__ import annotations

import math
from typing import Literal

from msgspec import Struct

from skyward.core.validation import wait_limit

NAMESPACE = "skyward"
MIN_HOSTS = 2
MAX_HOSTS = 16

STRONG = "strong"
EVENTUAL = "eventual"
Consistency = Literal["strong", "eventual"]
"""A collection's consistency (docs/collections.md), for type hints: ``sky.Consistency``."""
DEFAULT_CONSISTENCY = EVENTUAL

OP_TIMEOUT = 60.0
"""The longest wait for a host's answer to an operation that does not wait itself."""
RESEND_AFTER = 0.5
"""Seconds between sending an operation (a strong call, a batch, a poll) again to a host
that could not be reached just now."""

SYNC = "sync"
"""The kind of the no-op a node cache sends to learn that its earlier writes are applied."""

LEASE_TTL = 3.0
"""A holder (lock owner, barrier participant) not renewed for this long is dead."""
RENEW_EVERY = 0.5
"""How often a live holder's process renews its leases."""
CHECK_EVERY = 0.25
"""How often a host actor looks for expired leases. A dead holder is released at most
RENEW_EVERY + LEASE_TTL + CHECK_EVERY (3.75 s) after it died."""

DISABLED = (
    "Distributed collections require cluster mode, but this pool was created with "
    "Options(cluster=False). Remove cluster=False (or pass cluster=True) to use "
    "sky.dict(), sky.set(), sky.counter(), sky.queue(), sky.barrier() and sky.lock()."
)


class CollectionsConfig(Struct, frozen=True):
    """The collections of one pool: ``hosts`` shards, in one host actor named after
    ``pool_id``.
    ``enabled`` is False when the pool runs with ``Options(cluster=False)``.
    ``placement``: Ray resources (name, amount) each host asks for, to keep them where
    no node the pool removes can take them (a remote pool's head); empty: spread over
    the cluster. ``lanes_dir``: a directory only this user can enter, on the one machine
    that runs every process of the pool (a local pool's), where each shard also serves
    this machine's callers on a Unix socket (``host_lane``); empty: Ray only."""

    pool_id: str
    hosts: int
    enabled: bool = True
    placement: tuple[tuple[str, float], ...] = ()
    lanes_dir: str = ""

    @property
    def hosts_name(self) -> str:
        """The Ray actor name of the pool's hosts (namespace ``NAMESPACE``)."""
        return f"skyward:{self.pool_id}:collections"


def host_count(nodes: int) -> int:
    """How many shards a pool of ``nodes`` nodes gets: one per node, within
    ``MIN_HOSTS``..``MAX_HOSTS``."""
    return max(MIN_HOSTS, min(MAX_HOSTS, nodes))


def resolve(factory: str, consistency: object) -> str:
    """``consistency`` or the default; ValueError naming the factory for anything else."""
    if consistency is None:
        return DEFAULT_CONSISTENCY
    if consistency not in (STRONG, EVENTUAL):
        raise ValueError(
            f"{factory}(consistency={consistency!r}) is not valid: use \"strong\", \"eventual\" "
            f"or None (the default, {DEFAULT_CONSISTENCY!r})"
        )
    return str(consistency)


def check_timeout(call: str, timeout: object) -> float | None:
    """``timeout`` in seconds as waits take it: None for no limit (None, ``math.inf``
    or ``NO_LIMIT`` and up). ValueError naming ``call`` for anything else (NaN, < 0)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
        raise ValueError(f"{call}(timeout={timeout!r}): use None (no limit) or a number of seconds >= 0")
    return wait_limit(timeout)


def check_name(factory: str, name: object) -> str:
    """The collection name; TypeError/ValueError naming the factory if it is not a non-empty str."""
    if not isinstance(name, str):
        raise TypeError(f"{factory}(name={name!r}): the name must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{factory}(name=''): the name must not be empty")
    return name
