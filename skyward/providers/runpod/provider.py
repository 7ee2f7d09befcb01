"""``sky.RunPod(...)``: GPU pods on RunPod, each a container with SSH.

Offers are RunPod's GPU types at 1, 2, 4 and 8 GPUs per pod, priced on demand and
interruptible (spot) for the chosen ``cloud_type``; each node is one pod of
``container_image`` (default: RunPod's PyTorch image) with port 22 exposed. See
docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import DockerImage, image_field, runpod_pytorch
from skyward.core.validation import check_choice
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.runpod.api import RunPodAPI

CLOUD_TYPES = ("secure", "community", "all")


@dataclass(frozen=True, slots=True)
class RunPod(MachineCloud):
    """RunPod pods. ``container_image``: a ``sky.containers`` image or tag (it must run
    sshd with ``PUBLIC_KEY``, as RunPod's images do); ``cloud_type``: "secure",
    "community" or "all"; ``region``: a data center id (None: any)."""

    name: ClassVar[str] = "runpod"
    label: ClassVar[str] = "RunPod"

    container_image: DockerImage | str | None = None
    """A string is read as an image reference (a DockerImage once made)."""
    cloud_type: str = "secure"
    region: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "container_image", image_field("RunPod", "container_image", self.container_image))
        check_choice("RunPod", "cloud_type", self.cloud_type, CLOUD_TYPES)

    def api(self) -> RunPodAPI:
        return RunPodAPI(self.cloud_type)

    def image(self, spec: Spec) -> str:
        chosen = self.container_image if isinstance(self.container_image, DockerImage) else runpod_pytorch()
        return chosen.tag
