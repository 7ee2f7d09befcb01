"""What an entity (one collection's state inside a host actor) may tell its host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Hooks:
    """``changed(slot)`` after a write (for caches watching that slot); ``hold(holder)`` /
    ``unhold(holder)`` when a holder starts or stops depending on this entity (a lock's
    owner, a barrier's participant), so the host keeps that holder's lease."""

    name: str
    changed: Callable[[Any], None]
    hold: Callable[[str], None]
    unhold: Callable[[str], None]
