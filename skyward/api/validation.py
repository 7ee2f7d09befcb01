"""Small checks shared by the frozen configuration types: each error names the field,
the value it got and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def fail(owner: str, field: str, value: Any, allowed: str) -> ValueError:
    """Build the ValueError every configuration type raises for a bad field."""
    return ValueError(f"{owner}.{field}={value!r} is not valid: {allowed}")


def check_choice(owner: str, field: str, value: Any, choices: Iterable[Any]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise fail(owner, field, value, f"use one of {listed}")


def check_number(
    owner: str,
    field: str,
    value: Any,
    *,
    minimum: float | None = None,
    integer: bool = False,
    optional: bool = False,
    strictly_positive: bool = False,
) -> None:
    """Raise ValueError unless ``value`` is a number in range (None allowed if optional)."""
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise fail(owner, field, value, f"it must be {kind}")
    if strictly_positive and value <= 0:
        raise fail(owner, field, value, "it must be greater than 0")
    if minimum is not None and value < minimum:
        raise fail(owner, field, value, f"it must be >= {minimum}")


def as_str_tuple(owner: str, field: str, value: Any) -> tuple[str, ...]:
    """Normalise a list/tuple of strings to a tuple; a bare string is rejected."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise fail(owner, field, value, "pass a list of strings, e.g. [\"numpy\"]")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise fail(owner, field, value, f"every item must be a string, got {item!r}")
    return items


def check_str_dict(owner: str, field: str, value: Any) -> dict[str, str]:
    """Return a copy of a str->str mapping, or raise ValueError naming the bad entry."""
    if not isinstance(value, dict):
        raise fail(owner, field, value, "pass a dict of str to str")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise fail(owner, field, value, f"entry {key!r}: {item!r} must map str to str")
    return dict(value)
