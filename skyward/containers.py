"""``sky.containers``: base images for the clouds that run containers (RunPod, Vast.ai,
Novita), given as ``RunPod(container_image=...)``, ``VastAI(docker_image=...)`` or
``Novita(docker_image=...)``.

    sky.containers.cuda("12.9", variant="devel", ubuntu="24.04")  # nvidia/cuda:12.9.0-devel-ubuntu24.04
    sky.containers.ubuntu("24.04")                                 # ubuntu:24.04
    sky.containers.pytorch("2.8", cuda="12.8")                     # pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime
    sky.containers.runpod_pytorch("2.8")                           # runpod/pytorch:2.8.0-py3.11-cuda12.8.1-...
    sky.containers.DockerImage.of("repo/name:tag", cuda="12.8", ubuntu="22.04")

Every factory returns a frozen ``DockerImage``; a plain string tag is accepted wherever
one is, and becomes ``DockerImage.of(tag)``. The image needs ``bash`` and an SSH server
the cloud can start (the clouds' own and NVIDIA's images do); skyward installs Python
and its packages inside it as on any node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from skyward.core.validation import fail

_TAG = re.compile(r"^[a-z0-9][a-z0-9._\-/:@]*$", re.IGNORECASE)
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")
CUDA_VARIANTS = ("base", "runtime", "devel", "cudnn-runtime", "cudnn-devel")
UBUNTU_RELEASES = ("20.04", "22.04", "24.04")


@dataclass(frozen=True, slots=True)
class DockerImage:
    """A container image reference (``tag``), with the CUDA and Ubuntu versions it is
    known to carry (None: not said)."""

    tag: str
    cuda: str | None = None
    ubuntu: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tag, str) or not _TAG.match(self.tag) or " " in self.tag:
            raise fail("DockerImage", "tag", self.tag, 'give an image reference such as "nvidia/cuda:12.8.0-base-ubuntu24.04"')
        if self.cuda is not None:
            _version("DockerImage", "cuda", self.cuda)
        if self.ubuntu is not None and self.ubuntu not in UBUNTU_RELEASES:
            raise fail("DockerImage", "ubuntu", self.ubuntu, f"use one of {', '.join(UBUNTU_RELEASES)}")

    @classmethod
    def of(cls, tag: str | DockerImage, cuda: str | None = None, ubuntu: str | None = None) -> DockerImage:
        """``tag`` (any image reference) as a DockerImage; an image is returned as it is."""
        if isinstance(tag, DockerImage):
            return tag
        return cls(tag, cuda, ubuntu)

    def __str__(self) -> str:
        return self.tag


def cuda(version: str = "12.8", variant: str = "base", ubuntu: str = "24.04") -> DockerImage:
    """NVIDIA's CUDA image: ``nvidia/cuda:<version>-<variant>-ubuntu<ubuntu>`` (a two-part
    version gets ``.0``)."""
    _version("containers.cuda", "version", version)
    if variant not in CUDA_VARIANTS:
        raise fail("containers.cuda", "variant", variant, f"use one of {', '.join(CUDA_VARIANTS)}")
    if ubuntu not in UBUNTU_RELEASES:
        raise fail("containers.cuda", "ubuntu", ubuntu, f"use one of {', '.join(UBUNTU_RELEASES)}")
    full = version if version.count(".") == 2 else f"{version}.0"
    return DockerImage(f"nvidia/cuda:{full}-{variant}-ubuntu{ubuntu}", cuda=version, ubuntu=ubuntu)


def ubuntu(version: str = "24.04") -> DockerImage:
    """Canonical's Ubuntu image, ``ubuntu:<version>`` (no CUDA)."""
    if version not in UBUNTU_RELEASES:
        raise fail("containers.ubuntu", "version", version, f"use one of {', '.join(UBUNTU_RELEASES)}")
    return DockerImage(f"ubuntu:{version}", ubuntu=version)


def pytorch(version: str = "2.8", cuda: str = "12.8", cudnn: str = "9") -> DockerImage:
    """PyTorch's official image: ``pytorch/pytorch:<version>.0-cuda<cuda>-cudnn<cudnn>-runtime``."""
    _version("containers.pytorch", "version", version)
    _version("containers.pytorch", "cuda", cuda)
    full = version if version.count(".") == 2 else f"{version}.0"
    return DockerImage(f"pytorch/pytorch:{full}-cuda{cuda}-cudnn{cudnn}-runtime", cuda=cuda, ubuntu="22.04")


def runpod_pytorch(version: str = "2.8", python: str = "3.11", cuda: str = "12.8.1", ubuntu: str = "22.04") -> DockerImage:
    """RunPod's PyTorch image (SSH and Jupyter ready):
    ``runpod/pytorch:<version>.0-py<python>-cuda<cuda>-cudnn-devel-ubuntu<ubuntu>``."""
    _version("containers.runpod_pytorch", "version", version)
    _version("containers.runpod_pytorch", "cuda", cuda)
    full = version if version.count(".") == 2 else f"{version}.0"
    tag = f"runpod/pytorch:{full}-py{python}-cuda{cuda}-cudnn-devel-ubuntu{ubuntu}"
    return DockerImage(tag, cuda=cuda, ubuntu=ubuntu)


def image_field(owner: str, field: str, value: object) -> DockerImage | None:
    """A provider's container image field as a DockerImage (None stays None); ValueError
    naming the field for anything but a DockerImage or an image reference string."""
    if value is None:
        return None
    if isinstance(value, (DockerImage, str)):
        try:
            return DockerImage.of(value)
        except ValueError as exc:
            raise fail(owner, field, value, str(exc)) from None
    raise fail(owner, field, value, "use sky.containers.cuda(...) & co., sky.DockerImage(...) or an image tag string")


def refuse_container(owner: str, field: str, value: object) -> None:
    """ValueError when a container image is given to a provider of virtual machines."""
    if isinstance(value, DockerImage):
        raise fail(
            owner, field, value,
            f"sky.{owner} starts virtual machines, not containers; container images run on "
            "sky.RunPod(container_image=...), sky.VastAI(docker_image=...) and sky.Novita(docker_image=...)",
        )


def _version(owner: str, field: str, value: object) -> None:
    if not isinstance(value, str) or not _VERSION.match(value):
        raise fail(owner, field, value, 'give a version such as "12.8"')
