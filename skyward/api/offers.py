"""``sky.offers(...)``: what the machines a Spec asks for cost, across providers, before
anything is started."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from skyward.core.accelerators import Accelerator
from skyward.model.spec import Nodes, Spec
from skyward.providers.base import Offer, PriceSnapshotWarning, Provider, SnapshotPriced
from skyward.providers.names import clouds_with_credentials, snapshot_priced


class CloudSkippedWarning(UserWarning):
    """``sky.offers()`` over every cloud with credentials left one out: its offers could
    not be read (the message names the cloud and why)."""


def offers(
    provider: Provider | Sequence[Provider] | None = None,
    *,
    accelerator: Accelerator | None = None,
    nodes: int | tuple[int, int] | Nodes = 1,
    vcpus: float | None = None,
    memory_gb: float | None = None,
    architecture: str | None = None,
    allocation: str | float = "spot-if-available",
    region: str | None = None,
    max_hourly_cost: float | None = None,
) -> list[Offer]:
    """The priced offers that satisfy these Spec fields on ``provider`` (one provider or a
    list), cheapest first; each says whether its price is live or from a dated snapshot
    (``Offer.price_source``). Without ``provider``: every cloud whose credentials this
    machine has (as ``sky providers list`` finds them), where a cloud whose offers cannot
    be read is left out with a ``CloudSkippedWarning`` naming it and why. With no cloud
    credentials at all: the on-demand offers of the snapshot shipped with skyward (AWS's
    instance types and prices of its date; no spot), with a ``PriceSnapshotWarning``
    saying so. ``allocation`` picks the markets ("spot" only spot, "on-demand" only
    on-demand, else both); ``max_hourly_cost`` drops dearer offers. Fields are checked as
    ``sky.Spec`` checks them."""
    everywhere = provider is None
    providers: Sequence[Provider]
    snapshot = False
    if provider is None:
        providers = clouds_with_credentials()
        if not providers:
            providers, snapshot = snapshot_priced(), True
    else:
        providers = provider if isinstance(provider, (list, tuple)) else (provider,)
    found: list[Offer] = []
    for each in providers:
        spec = Spec(
            provider=each, accelerator=accelerator, nodes=nodes, vcpus=vcpus, memory_gb=memory_gb,
            architecture=architecture, allocation=allocation, region=region, max_hourly_cost=max_hourly_cost,
        )
        if snapshot and isinstance(each, SnapshotPriced):
            found.extend(_from_snapshot(each, spec))
            continue
        try:
            found.extend(each.offers(spec))
        except Exception as exc:
            if not everywhere:
                raise
            warnings.warn(f"sky.offers(): {each.name} left out, its offers could not be read: {exc}",
                          CloudSkippedWarning, stacklevel=2)
    return sorted(found, key=lambda offer: (offer.hourly_price, offer.provider, offer.instance_type, offer.spot))


def _from_snapshot(provider: SnapshotPriced, spec: Spec) -> list[Offer]:
    """``provider``'s offers from its shipped snapshot, with a ``PriceSnapshotWarning``
    saying why they are not live."""
    found = provider.snapshot_offers(spec)
    sources = sorted({offer.price_source for offer in found}) or ["snapshot"]
    warnings.warn(
        f"sky.offers(): no cloud credentials were found on this machine, so these are {provider.name}'s "
        f"on-demand prices from skyward's {' and '.join(sources)}, not live, and no spot prices; set a cloud's "
        "credentials for live prices (`sky providers list` says where each cloud looks)",
        PriceSnapshotWarning, stacklevel=3,
    )
    return found
