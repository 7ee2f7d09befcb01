"""What EC2 instance types cost per hour in a region, on demand and on spot.

On-demand prices come from the AWS Price List API (``pricing`` ``GetProducts``: every
Linux, shared-tenancy, plain instance type of the region, a few pages), kept a day; spot
prices from ``DescribeSpotPriceHistory`` (the latest price of each availability zone, the
lowest of them), kept ten minutes. Both under ``$SKYWARD_HOME/cache/aws``. Where the
Price List API cannot be read (no ``pricing:GetProducts``, an emulator, an outage),
on-demand prices come from ``price_snapshot.json``, a dated snapshot shipped with the
package, with a ``PriceSnapshotWarning`` naming why and the snapshot's date.
"""

from __future__ import annotations

import datetime
import functools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from skyward.providers.aws.catalog import InstanceType, cache_path, from_record, read_cache, write_cache
from skyward.providers.aws.session import client, explain
from skyward.providers.base import PriceSnapshotWarning
from skyward.providers.cloud import fields
from skyward.providers.cloud.errors import CloudAnswerError

ONDEMAND_TTL = 24 * 3600.0
SPOT_TTL = 600.0
PRICING_REGION = "us-east-1"
"""The Price List API answers from us-east-1 for every region."""
SNAPSHOT = Path(__file__).with_name("price_snapshot.json")
LIVE = "live"


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per hour of one instance type (None: not sold that way here).
    ``ondemand_source``: ``LIVE``, or ``"snapshot YYYY-MM-DD"`` when the on-demand price
    comes from the shipped snapshot."""

    ondemand: float | None
    spot: float | None
    ondemand_source: str = LIVE


def prices(region: str, types: list[str]) -> dict[str, Prices]:
    """Prices of ``types`` in ``region``; on-demand ones from the snapshot (with a
    ``PriceSnapshotWarning``) when the Price List API cannot be read. Raises the Price
    List API's error when the snapshot has no prices for ``region`` either."""
    ondemand, source = _ondemand(region, types)
    spot = _spot(region, types)
    return {name: Prices(ondemand.get(name), spot.get(name), source) for name in types}


def _ondemand(region: str, types: list[str]) -> tuple[dict[str, float], str]:
    """The on-demand prices of ``types`` and where they come from."""
    path = cache_path(region, "ondemand")
    known = _price_map(read_cache(path, ONDEMAND_TTL))
    source = LIVE
    if known is None:
        try:
            known = _price_list(region)
        except Exception as exc:
            error = explain(exc, "reading on-demand prices from the AWS Price List API", region)
            known, source = _from_snapshot(region, error)
        else:
            write_cache(path, known)
    return {name: known[name] for name in types if name in known}, source


def _price_list(region: str) -> dict[str, float]:
    """Every on-demand price of ``region`` the Price List API has."""
    known: dict[str, float] = {}
    pages = client("pricing", PRICING_REGION).get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=_filters(region), PaginationConfig={"PageSize": 100}
    )
    for page in pages:
        for entry in fields.items(page, "PriceList"):
            item = fields.as_object(json.loads(entry) if isinstance(entry, str) else entry, "a Price List entry")
            name = fields.text(fields.obj(fields.obj(item, "product"), "attributes"), "instanceType", "")
            price = _hourly([item])
            if name and price is not None:
                known[name] = min(price, known.get(name, price))
    return known


def _from_snapshot(region: str, error: BaseException) -> tuple[dict[str, float], str]:
    """The snapshot's on-demand prices of ``region``, warning why they are used; raises
    ``error`` (noting the regions it has) when the snapshot has none for ``region``."""
    date, regions = snapshot()
    if region not in regions:
        error.add_note(f"skyward's price snapshot of {date} has only {', '.join(regions)}; pick one of them")
        raise error
    warnings.warn(
        f"AWS on-demand prices in {region} are from skyward's snapshot of {date}, not live: {error}. "
        "Live prices return once the Price List API answers (the IAM identity needs pricing:GetProducts)",
        PriceSnapshotWarning,
    )
    return regions[region], f"snapshot {date}"


@functools.cache
def _shipped() -> fields.JsonObject:
    """The shipped snapshot's JSON, read once."""
    return fields.as_object(json.loads(SNAPSHOT.read_text()), "skyward's price snapshot")


def snapshot() -> tuple[str, dict[str, dict[str, float]]]:
    """The shipped snapshot: its date and its on-demand prices by region and type."""
    shipped = _shipped()
    return str(shipped["date"]), cast("dict[str, dict[str, float]]", shipped["ondemand"])


@functools.cache
def snapshot_types() -> tuple[InstanceType, ...]:
    """The instance types the shipped snapshot prices, as EC2 describes them (written
    from moto's copy of ``DescribeInstanceTypes`` by scripts/aws_type_snapshot.py)."""
    return tuple(from_record(item) for item in fields.as_objects(_shipped()["types"], "the snapshot's instance types"))


def _filters(region: str) -> list[dict[str, str]]:
    """Linux, shared tenancy, nothing pre-installed, in ``region``: the plain price."""
    wanted = {
        "regionCode": region, "operatingSystem": "Linux", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in wanted.items()]


def _hourly(price_list: list[object]) -> float | None:
    """The lowest positive hourly USD price in Price List entries (JSON strings)."""
    found = []
    for entry in price_list:
        item = fields.as_object(json.loads(entry) if isinstance(entry, str) else entry, "a Price List entry")
        for term in fields.obj(fields.obj(item, "terms"), "OnDemand").values():
            for listed in fields.obj(fields.as_object(term, "a price term"), "priceDimensions").values():
                dimension = fields.as_object(listed, "a price dimension")
                usd = fields.number(fields.obj(dimension, "pricePerUnit"), "USD", 0)
                if usd > 0 and str(dimension.get("unit", "Hrs")).lower().startswith("hr"):
                    found.append(usd)
    return min(found) if found else None


def _price_map(cached: object) -> dict[str, float] | None:
    """Prices by instance type as a cache holds them (None: no cache)."""
    if not isinstance(cached, dict):
        return None
    return {str(name): fields.to_number(price, str(name)) for name, price in cached.items()}


def _spot(region: str, types: list[str]) -> dict[str, float]:
    path = cache_path(region, "spot")
    known = _price_map(read_cache(path, SPOT_TTL)) or {}
    missing = [name for name in types if name not in known]
    if missing:
        ec2 = client("ec2", region)
        latest: dict[tuple[str, str], tuple[datetime.datetime, float]] = {}
        try:
            pages = ec2.get_paginator("describe_spot_price_history").paginate(
                InstanceTypes=missing, ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
                StartTime=datetime.datetime.now(datetime.timezone.utc),
            )
            for page in pages:
                for entry in fields.objects(page, "SpotPriceHistory"):
                    key = (fields.text(entry, "InstanceType"), fields.text(entry, "AvailabilityZone"))
                    stamp, price = entry.get("Timestamp"), fields.number(entry, "SpotPrice")
                    if not isinstance(stamp, datetime.datetime):
                        raise CloudAnswerError(f"a spot price's Timestamp is {stamp!r:.100}, not a time")
                    if key not in latest or stamp > latest[key][0]:
                        latest[key] = (stamp, price)
        except Exception as exc:
            raise explain(exc, "reading spot prices", region) from exc
        for (name, _), (_, price) in latest.items():
            known[name] = min(price, known.get(name, price))
        write_cache(path, known)
    return {name: known[name] for name in types if name in known}
