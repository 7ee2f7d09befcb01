"""What skyward offers on Compute Engine and at what price: a dated snapshot of hourly
list prices shipped with the package (``price_snapshot.json``; Google publishes no price
API that works without a billing account's key), the GPUs as Google names them read into
the accelerator catalog, and the N1 machines with attached GPUs that are offered."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("price_snapshot.json")

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


def region_of(zone: str) -> str:
    """``us-central1-a`` -> ``us-central1``."""
    return zone.rsplit("-", 1)[0]
