"""The machine image for an instance type, looked up in its region (never a hard-coded
id): AWS's Deep Learning base AMI (NVIDIA driver) for NVIDIA GPUs, its Neuron AMI for
Trainium and Inferentia, Canonical's Ubuntu 24.04 otherwise. Each is read from AWS's
public SSM parameter for it, else found with ``DescribeImages`` (newest of its owner's
images of that name)."""

from __future__ import annotations

from dataclasses import dataclass

from skyward.providers.aws.catalog import InstanceType
from skyward.providers.aws.session import AWSError, client, explain
from skyward.providers.cloud import fields

CANONICAL = "099720109477"
AMAZON = "amazon"


@dataclass(frozen=True, slots=True)
class ImageQuery:
    """Where to find one kind of image: an SSM parameter, then a DescribeImages search."""

    parameter: str
    owner: str
    name: str
    label: str


def query_for(kind: InstanceType) -> ImageQuery:
    """The image an instance of ``kind`` boots."""
    arch, deb = ("arm64", "arm64") if kind.architecture == "arm64" else ("x86_64", "amd64")
    name = (kind.accelerator or "").lower()
    if kind.accelerator and ("trainium" in name or "inferentia" in name or name.startswith(("trn", "inf"))):
        return ImageQuery(
            "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id", AMAZON,
            "Deep Learning AMI Neuron (Ubuntu 22.04)*", "the Neuron deep learning AMI",
        )
    if kind.accelerator:
        return ImageQuery(
            f"/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id", AMAZON,
            "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*", "the NVIDIA deep learning base AMI",
        )
    return ImageQuery(
        f"/aws/service/canonical/ubuntu/server/24.04/stable/current/{deb}/hvm/ebs-gp3/ami-id", CANONICAL,
        f"ubuntu/images/hvm-ssd*/ubuntu-noble-24.04-{deb}-server-*", "Ubuntu 24.04",
    )


def find_image(region: str, kind: InstanceType) -> str:
    """The AMI id for ``kind`` in ``region``; AWSError naming what was searched if none."""
    query = query_for(kind)
    try:
        return fields.text(fields.obj(client("ssm", region).get_parameter(Name=query.parameter), "Parameter"), "Value")
    except Exception:  # not readable here (permissions, an emulator): search the images
        pass
    try:
        images = fields.objects(client("ec2", region).describe_images(
            Owners=[query.owner], Filters=[{"Name": "name", "Values": [query.name]}, {"Name": "state", "Values": ["available"]}]
        ), "Images")
    except Exception as exc:
        raise explain(exc, f"looking up {query.label}", region) from exc
    if not images:
        raise AWSError(
            f"no image of {query.label} was found in {region} (SSM parameter {query.parameter}, or owner "
            f"{query.owner}'s images named {query.name!r}); pass sky.AWS(ami='ami-...')"
        )
    return fields.text(max(images, key=lambda image: fields.text(image, "CreationDate", "")), "ImageId")


def root_device(region: str, image: str) -> str:
    """The name of ``image``'s root device (where ``Spec.disk_gb`` applies)."""
    try:
        images = fields.objects(client("ec2", region).describe_images(ImageIds=[image]), "Images")
    except Exception as exc:
        raise explain(exc, f"describing image {image}", region) from exc
    if not images:
        raise AWSError(f"image {image} does not exist in {region}; check AWS(ami=...)")
    return fields.text(images[0], "RootDeviceName", "/dev/sda1")
