"""``sky.offers(...)``: what the machines a Spec asks for cost, across providers, before
anything is started."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyward.model.spec import Spec
from skyward.providers.base import Offer


def offers(
    provider: Any = None,
    *,
    accelerator: Any = None,
    nodes: Any = 1,
    vcpus: float | None = None,
    memory_gb: float | None = None,
    architecture: str | None = None,
    allocation: Any = "spot-if-available",
    region: str | None = None,
    max_hourly_cost: float | None = None,
) -> list[Offer]:
    """The priced offers that satisfy these Spec fields on ``provider`` (one provider or a
    list; default ``sky.AWS()``), cheapest first. ``allocation`` picks the markets
    ("spot" only spot, "on-demand" only on-demand, else both); ``max_hourly_cost`` drops
    dearer offers. Fields are checked as ``sky.Spec`` checks them."""
    if provider is None:
        from skyward.providers.aws.provider import AWS

        provider = AWS()
    providers: Sequence[Any] = provider if isinstance(provider, (list, tuple)) else (provider,)
    found: list[Offer] = []
    for each in providers:
        spec = Spec(
            provider=each, accelerator=accelerator, nodes=nodes, vcpus=vcpus, memory_gb=memory_gb,
            architecture=architecture, allocation=allocation, region=region, max_hourly_cost=max_hourly_cost,
        )
        found.extend(each.offers(spec))
    return sorted(found, key=lambda offer: (offer.hourly_price, offer.provider, offer.instance_type, offer.spot))
