"""``sky.gc``: find what skyward created in a cloud that no live pool owns, say what it
has cost so far, and delete it on confirmation.

A resource is an orphan when its ``skyward:expires`` time has passed (its pool stopped
renewing it: the client is gone, wherever it ran), or when it was created from this
machine and its pool is not open here any more (``registry``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skyward.providers import registry


@dataclass(frozen=True, slots=True)
class Orphan:
    """One cloud resource no live pool owns."""

    provider: str
    region: str | None
    kind: str
    """"instance", "security-group", "key-pair", ..."""
    id: str
    pool: str
    reason: str
    launched: float | None = None
    """When it started (epoch seconds), for what it costs."""
    hourly_price: float = 0.0

    @property
    def cost_so_far(self) -> float:
        """Dollars it has cost since it started (0 for free resources)."""
        if self.launched is None:
            return 0.0
        return self.hourly_price * max(0.0, time.time() - self.launched) / 3600


@runtime_checkable
class Collectable(Protocol):
    """A provider whose leftovers ``gc`` can find and delete."""

    @property
    def name(self) -> str:
        """The provider's name, as ``Orphan.provider`` gives it."""

    def orphans(self) -> list[Orphan]:
        """What it holds that no live pool owns."""

    def remove(self, orphans: Sequence[Orphan]) -> None:
        """Delete ``orphans`` (instances first, confirmed); TeardownError names what is left."""


def collectable(providers: Iterable[object]) -> list[Collectable]:
    """``providers``, each checked to be one ``gc`` can clean; TypeError naming one that is not."""
    found: list[Collectable] = []
    for provider in providers:
        if not isinstance(provider, Collectable):
            raise TypeError(f"sky.gc() takes cloud providers such as sky.AWS(), got {provider!r}")
        found.append(provider)
    return found


def gc(
    providers: Sequence[Collectable] | None = None,
    *,
    delete: bool = False,
    confirm: Callable[[list[Orphan]], bool] | None = None,
    unreachable: Callable[[Collectable, Exception], None] | None = None,
) -> list[Orphan]:
    """The orphans of ``providers`` (default: ``sky.AWS()``). With ``delete=True`` they are
    deleted once ``confirm(orphans)`` says yes (no ``confirm``: at once), and so are the
    records and files of their pools that a dead process left on this machine
    (``registry.forget_dead``). Returns what was found. A provider whose orphans cannot
    be listed raises, unless ``unreachable`` is given: it is then told, and that provider
    is left out (what it holds stays until a later ``gc`` reaches it)."""
    if providers is None:
        from skyward.providers.aws.provider import AWS

        providers = [AWS()]
    collectable(providers)
    found: list[Orphan] = []
    asked: list[Collectable] = []
    for provider in providers:
        try:
            found.extend(provider.orphans())
        except Exception as exc:
            if unreachable is None:
                raise
            unreachable(provider, exc)
            continue
        asked.append(provider)
    if delete and found and (confirm is None or confirm(found)):
        for provider in asked:
            mine = [orphan for orphan in found if orphan.provider == provider.name]
            if mine:
                provider.remove(mine)
        registry.forget_dead(orphan.pool for orphan in found)
    return found
