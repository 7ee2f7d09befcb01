"""Readable durations: ``sky.time.minutes(10)`` is 600.0 seconds.

Each takes a number >= 0 (``math.inf`` stays infinite: no limit, where a timeout takes
it); a string, a bool, NaN or a negative number raises ValueError naming the function."""

from __future__ import annotations

from skyward.core.validation import check_number


def _scaled(unit: str, n: float, scale: float) -> float:
    check_number("sky.time", unit, n, minimum=0)
    return float(n) * scale


def seconds(n: float) -> float:
    """``n`` seconds."""
    return _scaled("seconds", n, 1.0)


def minutes(n: float) -> float:
    """``n`` minutes in seconds."""
    return _scaled("minutes", n, 60.0)


def hours(n: float) -> float:
    """``n`` hours in seconds."""
    return _scaled("hours", n, 3600.0)


def days(n: float) -> float:
    """``n`` days in seconds."""
    return _scaled("days", n, 86400.0)
