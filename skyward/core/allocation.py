"""Spot or on-demand: ``Spec.allocation`` and the older ``sky.Allocation`` classes.

A Spec keeps its allocation as one canonical value: ``"spot-if-available"`` (spot where
a provider has it, else on-demand, per node), ``"spot"`` (spot only; ``"always-spot"``
is its older name), ``"on-demand"``, ``"cheapest"`` (the cheaper market of each offer),
or a float in (0, 1]: at least that share of the nodes on spot, the rest on demand.
"""

from __future__ import annotations

import math

from msgspec import Struct

from skyward.core.validation import fail

STRATEGIES = ("spot-if-available", "spot", "on-demand", "cheapest")
ALIASES = {"always-spot": "spot"}
AllocationValue = str | float


class _Strategy(Struct, frozen=True):
    value: AllocationValue


class Allocation:
    """The older reference's allocation classes; each stands for one canonical value."""

    @staticmethod
    def SpotIfAvailable() -> _Strategy:  # noqa: N802
        return _Strategy("spot-if-available")

    @staticmethod
    def AlwaysSpot() -> _Strategy:  # noqa: N802
        return _Strategy("spot")

    OnDemand = _Strategy("on-demand")

    @staticmethod
    def Cheapest() -> _Strategy:  # noqa: N802
        return _Strategy("cheapest")

    @staticmethod
    def Percent(spot: float) -> _Strategy:  # noqa: N802
        return _Strategy(normalize(spot))


def normalize(value: object) -> AllocationValue:
    """The canonical allocation for ``value``; ValueError naming the field otherwise."""
    if isinstance(value, _Strategy):
        return value.value
    if isinstance(value, str):
        canonical = ALIASES.get(value, value)
        if canonical in STRATEGIES:
            return canonical
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value) and 0 < value <= 1:
            return float(value)
        raise fail("Spec", "allocation", value, "a spot share must be a number in (0, 1], e.g. 0.8")
    listed = ", ".join(repr(s) for s in (*STRATEGIES, *ALIASES))
    raise fail("Spec", "allocation", value, f"use one of {listed}, a spot share in (0, 1] or sky.Allocation.*")


def wants_spot(allocation: AllocationValue) -> bool:
    """Whether spot capacity may be used at all."""
    return allocation != "on-demand"


def minimum_spot(allocation: AllocationValue, nodes: int) -> int:
    """How many of ``nodes`` must be spot (the rest may fall back to on-demand)."""
    if allocation == "spot":
        return nodes
    if isinstance(allocation, float):
        return math.ceil(allocation * nodes)
    return 0
