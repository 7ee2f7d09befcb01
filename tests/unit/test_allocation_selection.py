"""Spec.allocation normalisation (strings, the older names and classes, a spot share)
and Options.selection (built-in orders and callables) without any cloud."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

import skyward as sky
from skyward.api.selection import order
from skyward.core.allocation import minimum_spot
from skyward.providers.base import Offer


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("spot-if-available", "spot-if-available"), ("always-spot", "spot"), ("spot", "spot"),
        ("on-demand", "on-demand"), ("cheapest", "cheapest"), (0.8, 0.8), (1, 1.0),
        (sky.Allocation.SpotIfAvailable(), "spot-if-available"), (sky.Allocation.AlwaysSpot(), "spot"),
        (sky.Allocation.OnDemand, "on-demand"), (sky.Allocation.Cheapest(), "cheapest"),
        (sky.Allocation.Percent(spot=0.5), 0.5),
    ],
)
def test_allocations_normalise(given: object, canonical: object) -> None:
    assert sky.Spec(provider=sky.Local(), allocation=given).allocation == canonical


@pytest.mark.parametrize("bad", ["sometimes", 0, 1.5, -0.1, math.nan, True, None])
def test_bad_allocations_name_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match=r"Spec\.allocation="):
        sky.Spec(provider=sky.Local(), allocation=bad)


def test_minimum_spot_share() -> None:
    assert minimum_spot("spot", 4) == 4
    assert minimum_spot(0.8, 4) == 4 and minimum_spot(0.5, 3) == 2
    assert minimum_spot("spot-if-available", 4) == 0


@dataclass(frozen=True)
class Priced:
    """A provider stand-in with fixed offers (selection only asks for offers)."""

    price: float | None
    name: ClassVar[str] = "priced"
    priced: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()

    def offers(self, spec: sky.Spec) -> list[Offer]:
        if self.price is None:
            return []
        return [Offer("priced", "m", 2, 4, self.price, False)]


def test_built_in_orders() -> None:
    dear, cheap, none = (sky.Spec(provider=Priced(p)) for p in (3.0, 1.0, None))
    local = sky.Spec(provider=sky.Local())
    specs = (dear, none, cheap, local)
    assert order(specs, "first") == list(specs)
    assert order(specs, "cheapest") == [local, cheap, dear, none]
    assert order(specs, "available") == [dear, cheap, local, none]
    assert sky.select_cheapest(specs) == [local, cheap, dear, none]


def test_a_callable_picks_one_and_the_rest_follow() -> None:
    a, b, c = (sky.Spec(provider=Priced(p)) for p in (1.0, 2.0, 3.0))
    assert order((a, b, c), lambda specs: specs[2]) == [c, a, b]
    assert order((a, b, c), lambda specs: [b, a]) == [b, a, c]
    with pytest.raises(TypeError, match="not one of the pool's Specs"):
        order((a, b), lambda specs: sky.Spec(provider=Priced(9.0)))
    assert sky.Options(selection=lambda specs: specs[0]).selection is not None
    with pytest.raises(ValueError, match="Options.selection="):
        sky.Options(selection="random")
