"""``sky.DigitalOcean(region="nyc1")``: Droplets (CPU, and GPU where the region has them).

Offers are the sizes available in ``region`` at their hourly price (DigitalOcean sells
no spot machines); each node is one Droplet of ``image`` (default: Ubuntu 24.04, or
DigitalOcean's AI/ML-ready GPU image for GPU sizes) with the pool's SSH key, tagged
``skyward`` and with the pool's group, behind the pool's Cloud Firewall (inbound SSH, and
anything from the pool's own Droplets). See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_choice, fail
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.digitalocean.api import DigitalOceanAPI

REGIONS = ("nyc1", "nyc3", "sfo2", "sfo3", "ams3", "sgp1", "lon1", "fra1", "tor1", "blr1", "syd1", "atl1")
CPU_IMAGE = "ubuntu-24-04-x64"
GPU_IMAGE = "gpu-h100x1-base"


@dataclass(frozen=True, slots=True)
class DigitalOcean(MachineCloud):
    """Droplets in ``region`` (one of ``REGIONS``); ``image`` overrides the image slug."""

    name: ClassVar[str] = "digitalocean"
    label: ClassVar[str] = "DigitalOcean"
    spot_market: ClassVar[bool] = False
    regions: ClassVar[tuple[str, ...] | None] = REGIONS

    region: str = "nyc1"
    image_slug: str | None = None

    def __post_init__(self) -> None:
        refuse_container("DigitalOcean", "image_slug", self.image_slug)
        check_choice("DigitalOcean", "region", self.region, REGIONS)
        if self.image_slug is not None and (not isinstance(self.image_slug, str) or not self.image_slug):
            raise fail("DigitalOcean", "image_slug", self.image_slug, f'give an image slug such as "{CPU_IMAGE}"')

    def api(self) -> DigitalOceanAPI:
        return DigitalOceanAPI()

    def image(self, spec: Spec) -> str:
        return self.image_slug or (GPU_IMAGE if spec.accelerator is not None else CPU_IMAGE)
