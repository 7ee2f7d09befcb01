"""``sky.VastAI(...)``: GPU machines rented on Vast.ai's marketplace, each a container
with SSH.

Offers are the marketplace's verified, rentable asks, grouped by GPU, count and place,
priced on demand (``dph_total``) and interruptible (the lowest bid); each node accepts
the next free ask of the chosen group with ``docker_image`` (default: NVIDIA's CUDA
image). See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.providers.cloud.image_cloud import DockerImageCloud
from skyward.providers.vastai.api import VastAPI


@dataclass(frozen=True, slots=True)
class VastAI(DockerImageCloud):
    """Vast.ai instances. ``docker_image``: a ``sky.containers`` image or tag;
    ``region``: part of the hosts' location to keep ("US", "Sweden"; None: anywhere)."""

    name: ClassVar[str] = "vastai"
    label: ClassVar[str] = "Vast.ai"

    def api(self) -> VastAPI:
        return VastAPI()
