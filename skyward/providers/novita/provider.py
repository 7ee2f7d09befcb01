"""``sky.Novita(...)``: GPU instances on Novita AI, each a container with SSH.

Offers are Novita's GPU products at 1, 2, 4 and 8 GPUs per instance, priced on demand
(and spot where a product has a spot price); each node is one instance of
``docker_image`` (default: NVIDIA's CUDA image) with port 22 exposed. See
docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import DockerImage, cuda, image_field
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.novita.api import NovitaAPI


@dataclass(frozen=True, slots=True)
class Novita(MachineCloud):
    """Novita instances. ``docker_image``: a ``sky.containers`` image or tag;
    ``region``: a cluster id (None: any)."""

    name: ClassVar[str] = "novita"
    label: ClassVar[str] = "Novita"

    docker_image: DockerImage | str | None = None
    """A string is read as an image reference (a DockerImage once made)."""
    region: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "docker_image", image_field("Novita", "docker_image", self.docker_image))

    def api(self) -> NovitaAPI:
        return NovitaAPI()

    def image(self, spec: Spec) -> str:
        chosen = self.docker_image if isinstance(self.docker_image, DockerImage) else cuda("12.8", variant="runtime", ubuntu="24.04")
        return chosen.tag
