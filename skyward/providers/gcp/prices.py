"""What skyward offers on Compute Engine and at what price, on demand and on spot.

Prices are live: Google's Cloud Billing Catalog API (``GET
cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus``, Compute Engine's SKUs, a
few pages of 5,000) answers any caller with a ``cloud-platform`` token once the Cloud
Billing API is enabled in the project; no billing account or billing permission is
needed. A machine type costs its vCPUs times its family's "Instance Core" SKU plus its
memory (GiB) times the family's "Instance Ram" SKU, plus its GPUs times the GPU's SKU;
spot prices come from the "Spot Preemptible" SKUs (usage type ``Preemptible``). What the
catalog says is kept a day under ``$SKYWARD_HOME/cache/gcp``.

Where the catalog cannot be read (the Cloud Billing API not enabled, an outage) or lacks
a family in the region, prices come from ``price_snapshot.json``, a dated snapshot of
list prices shipped with the package, with a ``PriceSnapshotWarning`` naming why and the
snapshot's date. Also here: the GPUs as Google names them, read into the accelerator
catalog, and the N1 machines with attached GPUs that are offered."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skyward.core.paths import skyward_dir
from skyward.providers.cloud import fields
from skyward.providers.cloud.fields import JsonObject

SNAPSHOT = Path(__file__).with_name("price_snapshot.json")
LIVE = "live"
BILLING_URL = "https://cloudbilling.googleapis.com/v1"
COMPUTE_SERVICE = "6F81-5844-456A"
"""Compute Engine's service id in the Billing Catalog."""
SKUS_PATH = f"/services/{COMPUTE_SERVICE}/skus"
PAGE_SIZE = 5000
"""The catalog's largest page (``pageSize``)."""
TTL = 24 * 3600.0
ENABLE = (
    "enable the Cloud Billing API in the project (gcloud services enable cloudbilling.googleapis.com, or "
    "https://console.cloud.google.com/apis/library/cloudbilling.googleapis.com); no billing account is needed"
)

GPUS: dict[str, tuple[str, float]] = {
    "nvidia-tesla-t4": ("T4", 16.0),
    "nvidia-l4": ("L4", 24.0),
    "nvidia-tesla-a100": ("A100", 40.0),
    "nvidia-a100-80gb": ("A100", 80.0),
    "nvidia-h100-80gb": ("H100", 80.0),
    "nvidia-h100-mega-80gb": ("H100", 80.0),
    "nvidia-tesla-v100": ("V100", 16.0),
    "nvidia-tesla-p4": ("P4", 8.0),
    "nvidia-tesla-p100": ("P100", 16.0),
}
"""Compute Engine accelerator type -> (catalog name, memory of one GPU in GB)."""

ATTACHED: tuple[tuple[int, str], ...] = (
    (1, "n1-standard-4"), (1, "n1-standard-8"), (2, "n1-standard-16"), (4, "n1-standard-32"),
)
"""The N1 machines offered with GPUs attached (``guestAccelerators``): GPU count and
machine, within every N1 GPU's vCPU limit for that count."""
ATTACHABLE = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4")
"""The GPUs offered attached to N1 machines."""

FAMILIES = {"E2": "e2", "N2": "n2", "N1 Predefined": "n1", "G2": "g2", "A2": "a2", "A3": "a3"}
"""The family as the catalog's SKU descriptions name it -> the machine types' prefix."""
GPU_SKUS = {
    "Nvidia Tesla T4": "nvidia-tesla-t4", "Nvidia L4": "nvidia-l4", "Nvidia Tesla V100": "nvidia-tesla-v100",
    "Nvidia Tesla P100": "nvidia-tesla-p100", "Nvidia Tesla P4": "nvidia-tesla-p4",
    "Nvidia Tesla A100": "nvidia-tesla-a100", "Nvidia Tesla A100 80GB": "nvidia-a100-80gb",
    "Nvidia A100 80GB": "nvidia-a100-80gb", "Nvidia H100 80GB": "nvidia-h100-80gb",
    "Nvidia H100 80GB Mega": "nvidia-h100-mega-80gb",
}
"""The GPU as the catalog's SKU descriptions name it -> its accelerator type."""
USAGE = {"OnDemand": 0, "Preemptible": 1}
"""A SKU's usage type -> its place in a (on-demand, spot) pair; others (commitments) are not read."""
_SPOT = r"(?:Spot Preemptible |Preemptible )?"
_INSTANCE = re.compile(rf"^{_SPOT}(?P<family>.+?) Instance (?P<part>Core|Ram) running in ")
_GPU = re.compile(rf"^{_SPOT}(?P<gpu>Nvidia .+?) GPU(?: attached to Spot Preemptible VMs)? running in ")

Pair = tuple[float, float | None]
"""Dollars per hour on demand and on spot (None: no spot price)."""
Rates = dict[str, list[float | None]]
"""One region's unit prices, [on-demand, spot] per hour: ``"<family> core"`` per vCPU,
``"<family> ram"`` per GiB, ``"<accelerator type>"`` per GPU."""
Catalog = dict[str, Rates]
"""Unit prices by region."""


@dataclass(frozen=True, slots=True)
class Prices:
    """The snapshot's prices for one region: ``machines`` and ``gpus`` (per GPU attached
    to an N1 machine) as (on-demand, spot) dollars per hour."""

    date: str
    machines: dict[str, tuple[float, float]]
    gpus: dict[str, tuple[float, float]]

    @property
    def source(self) -> str:
        return f"snapshot {self.date}"


# ---------------------------------------------------------------------- the snapshot


@functools.cache
def _snapshot() -> tuple[str, dict[str, Prices]]:
    data = json.loads(SNAPSHOT.read_text())
    date = str(data["date"])
    regions = {
        name: Prices(
            date,
            {k: (float(v[0]), float(v[1])) for k, v in region["machines"].items()},
            {k: (float(v[0]), float(v[1])) for k, v in region["gpus"].items()},
        )
        for name, region in data["regions"].items()
    }
    return date, regions


def regions() -> list[str]:
    """The regions the snapshot prices."""
    return sorted(_snapshot()[1])


def prices(region: str) -> Prices | None:
    """The snapshot's prices in ``region`` (None: it has none there)."""
    return _snapshot()[1].get(region)


def snapshot_date() -> str:
    return _snapshot()[0]


@functools.cache
def offered() -> tuple[str, ...]:
    """The machine types offered (priced live or from the snapshot): those the snapshot
    knows in any region, in its order."""
    names: dict[str, None] = {}
    for found in _snapshot()[1].values():
        names.update(dict.fromkeys(found.machines))
    return tuple(names)


def region_of(zone: str) -> str:
    """``us-central1-a`` -> ``us-central1``."""
    return zone.rsplit("-", 1)[0]


# ---------------------------------------------------------------------- the live catalog


def read_catalog(skus: Iterable[JsonObject]) -> Catalog:
    """The unit prices of the families and GPUs skyward offers, by region, from the
    Billing Catalog's Compute Engine SKUs (the lowest where several SKUs price one thing)."""
    found: Catalog = {}
    for sku in skus:
        category = fields.obj(sku, "category")
        slot = USAGE.get(fields.text(category, "usageType", ""))
        if slot is None or fields.text(category, "resourceFamily", "Compute") != "Compute":
            continue
        key, unit = _key(fields.text(sku, "description", ""))
        price = _unit_price(sku, unit) if key else None
        if key is None or price is None:
            continue
        for region in fields.items(sku, "serviceRegions"):
            pair = found.setdefault(str(region), {}).setdefault(key, [None, None])
            known = pair[slot]
            pair[slot] = price if known is None else min(known, price)
    return found


def _key(description: str) -> tuple[str | None, str]:
    """What a SKU prices (see ``Rates``) and the usage unit it must be priced in."""
    instance = _INSTANCE.match(description)
    if instance and instance["family"] in FAMILIES:
        part = instance["part"].lower()
        return f"{FAMILIES[instance['family']]} {part}", "h" if part == "core" else "GiBy.h"
    gpu = _GPU.match(description)
    if gpu and gpu["gpu"] in GPU_SKUS:
        return GPU_SKUS[gpu["gpu"]], "h"
    return None, ""


def _unit_price(sku: JsonObject, unit: str) -> float | None:
    """The SKU's current USD price per ``unit`` (its last tier: the price past any free
    allowance); None when it is priced otherwise or at nothing."""
    info = fields.objects(sku, "pricingInfo")
    if not info:
        return None
    expression = fields.obj(info[0], "pricingExpression")
    tiers = fields.objects(expression, "tieredRates")
    if fields.text(expression, "usageUnit", "") != unit or not tiers:
        return None
    price = fields.obj(tiers[-1], "unitPrice")
    if fields.text(price, "currencyCode", "USD") != "USD":
        return None
    value = fields.number(price, "units", 0) + fields.number(price, "nanos", 0) / 1e9
    return value if value > 0 else None


def price_of(rates: Rates, family: str, vcpus: float, memory_gib: float, gpus: Iterable[tuple[str, int]]) -> Pair | None:
    """A machine's (on-demand, spot) price from unit prices: vCPUs x the family's core
    SKU + GiB x its RAM SKU + each GPU's SKU x its count. None when a part is not priced
    on demand; spot None when a part has no spot price."""
    parts = [(rates.get(f"{family} core"), vcpus), (rates.get(f"{family} ram"), memory_gib)]
    parts += [(rates.get(gpu), float(count)) for gpu, count in gpus]
    ondemand = spot = 0.0
    spot_known = True
    for rate, amount in parts:
        if rate is None or rate[0] is None:
            return None
        ondemand += rate[0] * amount
        if rate[1] is None:
            spot_known = False
        else:
            spot += rate[1] * amount
    return round(ondemand, 6), round(spot, 6) if spot_known else None


def cache_folder() -> Path:
    return skyward_dir("cache") / "gcp"


def cache_path(url: str) -> Path:
    """Where the catalog read from ``url`` is kept (keyed by the URL, so a test fake's
    answers never mix with Google's)."""
    return cache_folder() / f"billing-{hashlib.sha256(url.encode()).hexdigest()[:8]}.json"


def cached(url: str) -> Catalog | None:
    """The catalog read from ``url`` within a day, else None."""
    path = cache_path(url)
    try:
        if time.time() - path.stat().st_mtime > TTL:
            return None
        data: object = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    catalog: Catalog = {}
    for region, rates in data.items():
        if not isinstance(rates, dict):
            return None
        catalog[str(region)] = {
            str(key): [None if v is None else fields.to_number(v, str(key)) for v in pair]
            for key, pair in rates.items() if isinstance(pair, list) and len(pair) == 2
        }
    return catalog


def keep(url: str, catalog: Catalog) -> None:
    """Write ``catalog`` to its cache file atomically."""
    path = cache_path(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{time.monotonic_ns()}.part")
    partial.write_text(json.dumps(catalog))
    partial.replace(path)
