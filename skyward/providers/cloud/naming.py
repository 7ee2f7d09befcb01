"""Names that let ``sky gc`` recognise what a pool created on a cloud without tags:
``skyward-<pool 12>-<owner 6>-<index>`` for machines and ``skyward-<pool 12>-<owner 6>``
for keys, where the owner part is a digest of ``user@host`` of the client. A resource is
an orphan when it was created from this machine and its pool is no longer open here
(``registry``); resources of other machines' clients are left to them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from skyward.providers import registry
from skyward.providers.aws.machines import owner

_NAME = re.compile(r"^skyward-([0-9a-f]{12})-([0-9a-f]{6})(?:-(\d+))?$")


@dataclass(frozen=True, slots=True)
class Named:
    """What a skyward name says."""

    pool: str
    owner: str
    index: int | None


def owner_tag() -> str:
    """Six hex digits of ``user@host``: who created it."""
    return hashlib.sha256(owner().encode()).hexdigest()[:6]


def key_name(pool_id: str) -> str:
    return f"skyward-{pool_id[:12]}-{owner_tag()}"


def machine_name(pool_id: str, index: int) -> str:
    return f"{key_name(pool_id)}-{index}"


def parse(name: str) -> Named | None:
    """The pool, owner and index a skyward name holds; None for any other name."""
    match = _NAME.match(name or "")
    if match is None:
        return None
    return Named(match.group(1), match.group(2), int(match.group(3)) if match.group(3) else None)


def orphan_reason(name: str) -> str | None:
    """Why the resource called ``name`` is an orphan, or None when it is not (not ours,
    another machine's, or its pool is open here)."""
    named = parse(name)
    if named is None or named.owner != owner_tag() or registry.is_live(named.pool):
        return None
    return "its pool is not open on this machine any more"
