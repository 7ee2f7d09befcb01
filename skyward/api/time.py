"""Readable durations: ``sky.time.minutes(10)`` is 600.0 seconds."""

from __future__ import annotations


def seconds(n: float) -> float:
    """``n`` seconds."""
    return float(n)


def minutes(n: float) -> float:
    """``n`` minutes in seconds."""
    return float(n) * 60.0


def hours(n: float) -> float:
    """``n`` hours in seconds."""
    return float(n) * 3600.0


def days(n: float) -> float:
    """``n`` days in seconds."""
    return float(n) * 86400.0
