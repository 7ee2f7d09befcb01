"""How a pool's collections are laid out: which Ray actors hold them, under which names.

Every process of a pool (client, node agents, executor children) derives the same
layout from one ``CollectionsConfig``, so a collection name means the same actor
everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "skyward"
MIN_HOSTS = 2
MAX_HOSTS = 16

DISABLED = (
    "Distributed collections require cluster mode, but this pool was created with "
    "Options(cluster=False). Remove cluster=False (or pass cluster=True) to use "
    "sky.dict(), sky.set(), sky.counter(), sky.queue(), sky.barrier() and sky.lock()."
)


@dataclass(frozen=True, slots=True)
class CollectionsConfig:
    """The collections of one pool: ``hosts`` async actors named after ``pool_id``.
    ``enabled`` is False when the pool runs with ``Options(cluster=False)``."""

    pool_id: str
    hosts: int
    enabled: bool = True

    def host_name(self, index: int) -> str:
        """The Ray actor name of host ``index`` (namespace ``NAMESPACE``)."""
        return f"skyward:{self.pool_id}:collections:{index}"


def host_count(nodes: int) -> int:
    """How many host actors a pool of ``nodes`` nodes gets: one per node, within
    ``MIN_HOSTS``..``MAX_HOSTS``."""
    return max(MIN_HOSTS, min(MAX_HOSTS, nodes))
