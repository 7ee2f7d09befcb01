"""The two consistency levels and the checks shared by the collection factories."""

from __future__ import annotations

from typing import Any

STRONG = "strong"
EVENTUAL = "eventual"
DEFAULT = EVENTUAL


def resolve(factory: str, consistency: Any) -> str:
    """``consistency`` or the default; ValueError naming the factory for anything else."""
    if consistency is None:
        return DEFAULT
    if consistency not in (STRONG, EVENTUAL):
        raise ValueError(
            f"{factory}(consistency={consistency!r}) is not valid: use \"strong\", \"eventual\" "
            f"or None (the default, {DEFAULT!r})"
        )
    return str(consistency)


def check_name(factory: str, name: Any) -> str:
    """The collection name; TypeError/ValueError naming the factory if it is not a non-empty str."""
    if not isinstance(name, str):
        raise TypeError(f"{factory}(name={name!r}): the name must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError(f"{factory}(name=''): the name must not be empty")
    return name
