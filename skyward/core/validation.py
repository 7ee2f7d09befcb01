"""Small checks shared by the frozen configuration types: each error names the field,
the value it got and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

NO_LIMIT = 1e9
"""Seconds (about 31 years): a timeout this long or longer, ``math.inf`` included, means
no limit. Clocks and waits cannot represent much longer ones (OverflowError)."""

T = TypeVar("T")


def shown(value: object, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages; never raises (a
    value too deeply nested or whose ``__repr__`` fails shows as its type)."""
    try:
        text = repr(value)
    except Exception:  # RecursionError included
        return f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reject_unknown(owner: str, given: Iterable[str], known: Iterable[str], what: str = "keywords") -> None:
    """TypeError for the first of ``given`` that is not in ``known``: it names the
    keyword, the closest known one ("did you mean"), and every one ``owner`` takes."""
    taken = list(known)
    for key in given:
        if key not in taken:
            import difflib  # only for the error: not on every import's path

            close = difflib.get_close_matches(key, taken, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}=?)" if close else ""
            raise TypeError(f"{owner}() got an unknown keyword {key}={hint}; its {what}: {', '.join(taken)}")


def fail(owner: str, field: str, value: object, allowed: str) -> ValueError:
    """Build the ValueError every configuration type raises for a bad field."""
    return ValueError(f"{owner}.{field}={value!r} is not valid: {allowed}")


def check_choice(owner: str, field: str, value: object, choices: Iterable[object]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise fail(owner, field, value, f"use one of {listed}")


def check_number(
    owner: str,
    field: str,
    value: object,
    *,
    minimum: float | None = None,
    integer: bool = False,
    optional: bool = False,
    strictly_positive: bool = False,
    maximum: float | None = None,
    finite: bool = False,
) -> None:
    """Raise ValueError unless ``value`` is a number in range (None allowed if optional).
    NaN is always refused; infinity too when ``finite``."""
    if value is None and optional:
        return
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise fail(owner, field, value, f"it must be {kind}")
    if math.isnan(value):
        raise fail(owner, field, value, "it must be a number, not NaN")
    if finite and math.isinf(value):
        raise fail(owner, field, value, "it must be finite")
    if strictly_positive and value <= 0:
        raise fail(owner, field, value, "it must be greater than 0")
    if minimum is not None and value < minimum:
        raise fail(owner, field, value, f"it must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise fail(owner, field, value, f"it must be <= {maximum:,}")


def check_text(owner: str, field: str, value: object, allowed: str, *, optional: bool = False) -> None:
    """Raise ValueError unless ``value`` is a str with more than white space (or None, if
    ``optional``); ``allowed`` says what to give instead."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise fail(owner, field, value, allowed)


def check_secret(owner: str, field: str, value: object, what: str, fallback: str) -> None:
    """Raise ValueError unless ``value`` is None (``fallback`` is read instead) or a
    non-empty str; the message names ``what`` it should be and its type, never the value."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(
            f"{owner}.{field} of type {type(value).__name__} is not valid: give {what} as a "
            f"non-empty str, or leave it out to read {fallback}"
        )


def check_flag(owner: str, field: str, value: object) -> None:
    """Raise TypeError unless ``value`` is True or False (not merely truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{field}={value!r} is not valid: use True or False")


def wait_limit(seconds: float | None) -> float | None:
    """A validated timeout as waits take it: None (no limit) for None, ``math.inf`` and
    anything from ``NO_LIMIT`` up; the number otherwise."""
    if seconds is None or seconds >= NO_LIMIT:
        return None
    return float(seconds)


def as_str_tuple(owner: str, field: str, value: object) -> tuple[str, ...]:
    """Normalise a list/tuple of strings to a tuple; a bare string is rejected."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise fail(owner, field, value, "pass a list of strings, e.g. [\"numpy\"]")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise fail(owner, field, value, f"every item must be a string, got {item!r}")
    return items


def check_str_dict(owner: str, field: str, value: object) -> dict[str, str]:
    """Return a copy of a str->str mapping, or raise ValueError naming the bad entry."""
    if not isinstance(value, dict):
        raise fail(owner, field, value, "pass a dict of str to str")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise fail(owner, field, value, f"entry {key!r}: {item!r} must map str to str")
    return dict(value)


def as_tuple(owner: str, field: str, value: Iterable[T], example: str) -> tuple[T, ...]:
    """A list or tuple of items as a tuple; a str, a mapping or a non-iterable is refused
    (``example`` shows the expected form)."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise fail(owner, field, value, f"pass a list, e.g. {example}")
    return tuple(value)
