"""The half of a provider that container clouds share (``sky.Novita``, ``sky.VastAI``):
each machine is a container of ``docker_image``, in ``region`` as the cloud names it."""

from __future__ import annotations

from dataclasses import dataclass

from skyward.containers import DockerImage, cuda, image_field
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud


@dataclass(frozen=True, slots=True)
class DockerImageCloud(MachineCloud):
    """A cloud whose machines run ``docker_image`` (a ``sky.containers`` image or tag;
    None: NVIDIA's CUDA 12.8 runtime image on Ubuntu 24.04). ValueError for an image
    ``image_field`` refuses."""

    docker_image: DockerImage | str | None = None
    """A string is read as an image reference (a DockerImage once made)."""
    region: str | None = None

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(self, "docker_image", image_field(owner, "docker_image", self.docker_image))

    def image(self, spec: Spec) -> str:
        chosen = self.docker_image if isinstance(self.docker_image, DockerImage) else cuda("12.8", variant="runtime", ubuntu="24.04")
        return chosen.tag
