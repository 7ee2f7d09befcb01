"""``sky.VastAI(...)``: GPU machines rented on Vast.ai's marketplace, each a container
with SSH.

Offers are the marketplace's verified, rentable asks, grouped by GPU, count and place,
priced on demand (``dph_total``) and interruptible (the lowest bid); each node accepts
the next free ask of the chosen group with ``docker_image`` (default: NVIDIA's CUDA
image). See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import DockerImage, cuda, image_field
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.vastai.api import VastAPI


@dataclass(frozen=True, slots=True)
class VastAI(MachineCloud):
    """Vast.ai instances. ``docker_image``: a ``sky.containers`` image or tag;
    ``region``: part of the hosts' location to keep ("US", "Sweden"; None: anywhere)."""

    name: ClassVar[str] = "vastai"
    label: ClassVar[str] = "Vast.ai"

    docker_image: DockerImage | str | None = None
    """A string is read as an image reference (a DockerImage once made)."""
    region: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "docker_image", image_field("VastAI", "docker_image", self.docker_image))

    def api(self) -> VastAPI:
        return VastAPI()

    def image(self, spec: Spec) -> str:
        chosen = self.docker_image if isinstance(self.docker_image, DockerImage) else cuda("12.8", variant="runtime", ubuntu="24.04")
        return chosen.tag
