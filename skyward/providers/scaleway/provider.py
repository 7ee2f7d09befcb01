"""``sky.Scaleway(zone="fr-par-2")``: Instances (CPU and GPU virtual machines) on Scaleway.

Offers are the zone's server types at their live hourly prices (Scaleway bills in euros:
converted to dollars at ``usd_per_eur``, so they sort with other clouds' offers; types in
shortage are left out; Scaleway sells no spot Instances). Each pool gets
a security group of its own that admits SSH from anywhere and everything from the pool's
own servers only; each node is one server of ``image_name`` (default: Ubuntu 24.04, or its
GPU OS 12 variant with NVIDIA's drivers for GPU types) with the pool's key in its
``AUTHORIZED_KEY`` tag, tagged ``skyward`` and with the pool's group. Closing
terminates the servers (confirmed), then deletes the security group. See
docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_choice, check_secret, fail
from skyward.model.spec import Spec
from skyward.providers.cloud import credentials
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.scaleway.api import ZONE, ScalewayAPI

USD_PER_EUR = 1.15
"""A fixed rate, not a live one: give ``usd_per_eur`` for today's."""

ZONES = (
    "fr-par-1", "fr-par-2", "fr-par-3", "nl-ams-1", "nl-ams-2", "nl-ams-3", "pl-waw-1", "pl-waw-2", "pl-waw-3",
)
DEFAULT_ZONE = "fr-par-2"
"""Where Scaleway's GPU Instances are sold (and the scw CLI's default zone is unset)."""
CPU_IMAGE = "ubuntu_noble"
GPU_IMAGE = "ubuntu_noble_gpu_os_12"
"""Scaleway's image labels: Ubuntu 24.04, and Ubuntu 24.04 with NVIDIA's drivers and CUDA 12."""
IMAGE = re.compile(r"^[A-Za-z0-9_.-]+$")
PROJECT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True, slots=True)
class Scaleway(MachineCloud):
    """Scaleway Instances in ``zone`` (one of ``ZONES``; None: ``$SCW_DEFAULT_ZONE``, else
    ``default_zone`` in ``~/.config/scw/config.yaml``, else "fr-par-2"). ``image_name``: an
    image label or id (None: Ubuntu 24.04, its GPU OS 12 variant for GPU types);
    ``secret_key`` and ``project_id`` (None: ``$SCW_SECRET_KEY`` and
    ``$SCW_DEFAULT_PROJECT_ID``, else the scw CLI's config file). ``usd_per_eur``: the rate
    that turns Scaleway's euro prices into the dollars every offer is in (and
    ``Spec.max_hourly_cost`` compares with); the default is a fixed rate, not a live one."""

    name: ClassVar[str] = "scaleway"
    label: ClassVar[str] = "Scaleway"
    spot_market: ClassVar[bool] = False

    zone: str | None = None
    image_name: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    project_id: str | None = None
    usd_per_eur: float = USD_PER_EUR

    def __post_init__(self) -> None:
        refuse_container("Scaleway", "image_name", self.image_name)
        if isinstance(self.usd_per_eur, bool) or not isinstance(self.usd_per_eur, (int, float)) or not 0 < self.usd_per_eur < 100:
            raise fail("Scaleway", "usd_per_eur", self.usd_per_eur, "give the dollars one euro buys, e.g. 1.15")
        if self.zone is not None:
            check_choice("Scaleway", "zone", self.zone, ZONES)
        if self.image_name is not None and (not isinstance(self.image_name, str) or not IMAGE.match(self.image_name)):
            raise fail(
                "Scaleway", "image_name", self.image_name,
                f'give an image label such as "{CPU_IMAGE}" or "{GPU_IMAGE}", or an image id; None picks one',
            )
        if self.project_id is not None and (not isinstance(self.project_id, str) or not PROJECT_ID.match(self.project_id)):
            raise fail("Scaleway", "project_id", self.project_id, "give the project's id (a UUID from the Scaleway console)")
        check_secret(
            "Scaleway", "secret_key", self.secret_key, "the API secret key",
            "$SCW_SECRET_KEY (or ~/.config/scw/config.yaml)",
        )

    @property
    def zone_used(self) -> str:
        """``zone``, else the scw CLI's default zone, else "fr-par-2"."""
        found = self.zone or credentials.find("Scaleway", ZONE) or DEFAULT_ZONE
        if found not in ZONES:
            raise fail("Scaleway", "zone", found, f"$SCW_DEFAULT_ZONE or the scw config names it; use one of {', '.join(ZONES)}")
        return found

    def api(self) -> ScalewayAPI:
        return ScalewayAPI(self.zone_used, self.secret_key.strip() if self.secret_key else None, self.project_id,
                           float(self.usd_per_eur))

    def region_of(self, spec: Spec) -> str | None:
        return self.zone_used

    def image(self, spec: Spec) -> str:
        """``image_name``, else Ubuntu 24.04 (with NVIDIA's drivers for a GPU Spec)."""
        if self.image_name is not None:
            return self.image_name
        return GPU_IMAGE if spec.accelerator is not None else CPU_IMAGE

    def refuse(self, spec: Spec) -> None:
        if spec.region is not None and spec.region != self.zone_used:
            raise fail(
                "Spec", "region", spec.region,
                f"a Scaleway pool lives in its provider's zone ({self.zone_used}); give sky.Scaleway(zone=...)",
            )
