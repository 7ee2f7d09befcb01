"""``sky.Verda(region=None)``: virtual machines on Verda (formerly DataCrunch).

Offers are Verda's instance types where they are available now (every location when
``region`` is None: it auto-discovers), priced on demand and on spot; each node is one
instance of ``image`` (default: Verda's Ubuntu 24.04 with CUDA) with the pool's SSH key.
See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import fail
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.verda.api import VerdaAPI

DEFAULT_IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"


@dataclass(frozen=True, slots=True)
class Verda(MachineCloud):
    """Verda instances. ``region``: a location code such as "FIN-01" (None: wherever the
    type is available); ``image``: Verda's OS image name."""

    name: ClassVar[str] = "verda"
    label: ClassVar[str] = "Verda"

    region: str | None = None
    image_name: str = DEFAULT_IMAGE

    def __post_init__(self) -> None:
        refuse_container("Verda", "image_name", self.image_name)
        if self.region is not None and (not isinstance(self.region, str) or not self.region):
            raise fail("Verda", "region", self.region, 'give a location code such as "FIN-01", or None to auto-discover')
        if not isinstance(self.image_name, str) or not self.image_name:
            raise fail("Verda", "image_name", self.image_name, f'give a Verda image name such as "{DEFAULT_IMAGE}"')

    def api(self) -> VerdaAPI:
        return VerdaAPI()

    def image(self, spec: Spec) -> str:
        return self.image_name
