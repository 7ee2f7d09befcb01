"""Removing what a pool left in its cloud once the process that held it is gone (a
client killed with SIGKILL, a pool daemon that died): the pool's machines, keys and
firewalls, found by the tags or names every cloud provider gives them (``orphans``)."""

from __future__ import annotations

from skyward.providers import names
from skyward.providers.orphans import Collectable, Orphan


def remove_leftovers(provider: str, region: str | None, pool_id: str) -> list[Orphan]:
    """Remove what the cloud ``provider`` (in ``region``) still holds of pool ``pool_id``;
    what was removed (empty for a provider that is not a cloud). Raises what the cloud's
    removal raises when something could not be confirmed gone."""
    if provider not in names.CLOUDS:
        return []
    return remove_from(names.with_region(provider, region), pool_id)


def remove_from(cloud: object, pool_id: str) -> list[Orphan]:
    """Remove what ``cloud`` holds of pool ``pool_id`` (by id or its 12-character prefix)."""
    if not isinstance(cloud, Collectable):
        return []
    mine = [o for o in cloud.orphans() if pool_id.startswith(o.pool) or o.pool.startswith(pool_id[:12])]
    if mine:
        cloud.remove(mine)
    return mine
