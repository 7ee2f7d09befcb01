"""From a cloud's machine types to the priced offers that satisfy a Spec, cheapest
first, in the markets ``Spec.allocation`` allows (the same rules as AWS: unset vCPUs and
memory mean at least 2 vCPUs and 4 GB; no GPU unless one is asked for; a node on the
client's architecture so the shipped wheels fit)."""

from __future__ import annotations

import math

from skyward.core.accelerator_catalog import identify
from skyward.core.errors import NoAvailableProviderError
from skyward.model.spec import Spec
from skyward.providers.aws.catalog import hardware_fits
from skyward.providers.base import Offer
from skyward.providers.cloud.api import MachineType


def fits(kind: MachineType, spec: Spec) -> bool:
    """Whether one machine of ``kind`` satisfies ``spec``'s hardware (``hardware_fits``)
    and disk."""
    if spec.disk_gb is not None and kind.disk_gb is not None and kind.disk_gb < spec.disk_gb:
        return False
    return hardware_fits(kind, spec)


def offers(provider: str, kinds: list[MachineType], spec: Spec) -> list[Offer]:
    """Every market of every fitting kind, ordered as the launch tries them: with
    "spot-if-available" each kind's spot first, then its on-demand, kinds by their
    cheapest price; otherwise by price."""
    found: list[Offer] = []
    for kind in kinds:
        if not fits(kind, spec):
            continue
        if spec.allocation != "on-demand" and kind.spot_price is not None:
            found.append(_offer(provider, kind, kind.spot_price, True))
        if spec.allocation != "spot" and not isinstance(spec.allocation, float) and kind.price is not None:
            found.append(_offer(provider, kind, kind.price, False))
    if spec.allocation == "spot-if-available":
        cheapest: dict[tuple[str, str | None], float] = {}
        for offer in found:
            key = (offer.instance_type, offer.region)
            cheapest[key] = min(cheapest.get(key, math.inf), offer.hourly_price)
        found.sort(key=lambda o: (cheapest[(o.instance_type, o.region)], o.instance_type, o.region or "", not o.spot))
    else:
        found.sort(key=lambda o: (o.hourly_price, o.instance_type, o.region or "", o.spot))
    return found


def within(offer: Offer, spec: Spec) -> bool:
    return spec.max_hourly_cost is None or offer.hourly_price <= spec.max_hourly_cost


def allowed(provider: str, every: list[Offer], spec: Spec, where: str) -> list[Offer]:
    """The offers within ``Spec.max_hourly_cost``; NoAvailableProviderError saying what was
    found when none is left."""
    kept = [offer for offer in every if within(offer, spec)]
    if kept:
        return kept
    what = describe(spec)
    if not every:
        raise NoAvailableProviderError(
            f"{provider} has no machine {where} that satisfies {what} with a price in its allocation "
            f"({spec.allocation!r}); change the Spec, the region or the allocation"
        )
    cheapest = min(every, key=lambda offer: offer.hourly_price)
    raise NoAvailableProviderError(
        f"no {provider} offer {where} for {what} is within Spec.max_hourly_cost={spec.max_hourly_cost:g} per node: "
        f"the cheapest is {cheapest.instance_type} ({'spot' if cheapest.spot else 'on-demand'}) at "
        f"${cheapest.hourly_price:.4f}/h; raise the cap"
    )


def describe(spec: Spec) -> str:
    parts = [repr(spec.accelerator.name) if spec.accelerator else "CPU only"]
    for name in ("vcpus", "memory_gb", "disk_gb", "architecture"):
        if getattr(spec, name) is not None:
            parts.append(f"{name}={getattr(spec, name)!r}")
    return ", ".join(parts)


def _offer(provider: str, kind: MachineType, price: float, spot: bool) -> Offer:
    seen = identify(kind.accelerator) if kind.accelerator else None
    return Offer(
        provider=provider, instance_type=kind.name, vcpus=float(kind.vcpus), memory_gb=kind.memory_gb,
        hourly_price=price, spot=spot, region=kind.region,
        accelerator=seen.model.name if seen is not None else kind.accelerator,
        accelerator_count=float(kind.accelerator_count), accelerator_memory_gb=kind.accelerator_memory_gb,
        architecture=kind.architecture, ondemand_price=kind.price, price_source=kind.price_source,
    )
