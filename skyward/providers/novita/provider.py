"""``sky.Novita(...)``: GPU instances on Novita AI, each a container with SSH.

Offers are Novita's GPU products at 1, 2, 4 and 8 GPUs per instance, priced on demand
(and spot where a product has a spot price); each node is one instance of
``docker_image`` (default: NVIDIA's CUDA image) with port 22 exposed. See
docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.providers.cloud.image_cloud import DockerImageCloud
from skyward.providers.novita.api import NovitaAPI


@dataclass(frozen=True, slots=True)
class Novita(DockerImageCloud):
    """Novita instances. ``docker_image``: a ``sky.containers`` image or tag;
    ``region``: a cluster id (None: any)."""

    name: ClassVar[str] = "novita"
    label: ClassVar[str] = "Novita"

    def api(self) -> NovitaAPI:
        return NovitaAPI()
