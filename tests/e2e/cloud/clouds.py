"""The clouds of the provider conformance suite, each behind one interface: how to make
its provider against its local fake (or the local AWS), what its 2-node pool asks for,
what its ``validate`` must refuse, and how to look into the fake (what is left of a pool:
machines, keys and firewalls; planting an orphan, refusing capacity, the images it was
asked for)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cloud.fake_cloud import FakeCloud, summary
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.fake_gcp import FakeGCP
from cloud.fake_hyperstack import FakeHyperstack
from cloud.fake_jarvislabs import FakeJarvisLabs
from cloud.fake_lambda import FakeLambda
from cloud.fake_massedcompute import FakeMassedCompute
from cloud.fake_novita import FakeNovita
from cloud.fake_runpod import FakeRunPod
from cloud.fake_scaleway import FakeScaleway
from cloud.fake_tensordock import FakeTensorDock
from cloud.fake_vastai import FakeVastAI
from cloud.fake_verda import FakeVerda
from cloud.fake_vultr import FakeVultr
from cloud.machines import Harness, Machines

import skyward as sky
from skyward.providers.cloud import naming

L4 = sky.accelerators.L4()
OTHER_PYTHON = sky.Image(python="3.9")
GENERIC_REFUSALS = [({"image": OTHER_PYTHON}, "python"), ({"image": sky.Image(skyward_source="pypi")}, "skyward_source")]
CLOUDS = ("aws", "runpod", "vastai", "verda", "digitalocean", "novita", "hyperstack", "tensordock", "vultr", "lambda",
          "scaleway", "jarvislabs", "massedcompute", "gcp")


@dataclass
class Cloud:
    """One cloud under test."""

    name: str
    make: Callable[..., Any]
    """The provider, pointed at the fake (keywords: its own fields)."""
    pool: dict[str, Any]
    """Spec fields of the 2-node pool."""
    refusals: list[tuple[dict[str, Any], str]]
    leftovers: Callable[[str], list[str]]
    plant: Callable[[], str]
    refuse_all: Callable[[], None]
    allow_all: Callable[[], None]
    images: Callable[[], list[str]] | None = None
    """The container images create requests named (container clouds)."""
    image_field: str | None = None
    harness: Harness | None = field(default=None, repr=False)
    fake: FakeCloud | None = field(default=None, repr=False)
    """The fake cloud (None for AWS)."""


FAKES: dict[str, tuple[type[FakeCloud], str, str | None, dict[str, Any], list[tuple[dict[str, Any], str]]]] = {
    # name: (fake, create path, image key in the create body, pool fields, refusals)
    "runpod": (FakeRunPod, "/pods", "imageName", {"accelerator": L4},
               [({"allocation": 0.5}, "allocation"), ({"instance_type": "NVIDIA L4"}, "instance_type")]),
    "vastai": (FakeVastAI, "/asks/", "image", {"accelerator": L4},
               [({"allocation": 0.5}, "allocation"), ({"instance_type": "501"}, "instance_type")]),
    "verda": (FakeVerda, "/instances", None, {"vcpus": 2},
              [({"allocation": 0.5}, "allocation"), ({"instance_type": "CPU.4V.16G"}, "instance_type")]),
    "digitalocean": (FakeDigitalOcean, "/v2/droplets", None, {"vcpus": 2},
                     [({"allocation": "spot"}, "allocation"), ({"region": "mars1"}, "region")]),
    "novita": (FakeNovita, "/gpu/instance/create", "imageUrl", {"accelerator": L4},
               [({"allocation": 0.5}, "allocation"), ({"instance_type": "p-l4"}, "instance_type")]),
    "hyperstack": (FakeHyperstack, "/core/virtual-machines", None, {"accelerator": sky.accelerators.RTX_A6000()},
                   [({"allocation": 0.5}, "allocation"), ({"region": "NORWAY-1"}, "region")]),
    "tensordock": (FakeTensorDock, "/instances", None, {"accelerator": sky.accelerators.RTX_4090()},
                   [({"allocation": "spot"}, "allocation"), ({"instance_type": "1x h100-sxm5-80gb"}, "instance_type")]),
    "vultr": (FakeVultr, "/instances", None, {"accelerator": sky.accelerators.L40S()},
              [({"allocation": "spot"}, "allocation"), ({"instance_type": "vcg-l40s-16c-180g-48vram"}, "instance_type")]),
    "gcp": (FakeGCP, "/projects/skyward-test-1/zones/us-central1-a/instances", None, {"accelerator": L4},
            [({"allocation": 0.5}, "allocation"), ({"region": "europe-west4-b"}, "region")]),
    "lambda": (FakeLambda, "/instance-operations/launch", None, {"accelerator": sky.accelerators.A10()},
               [({"allocation": "spot"}, "allocation"), ({"region": "mars-1"}, "region")]),
    "scaleway": (FakeScaleway, "/instance/v1/zones/fr-par-2/servers", None, {"accelerator": L4},
                 [({"allocation": "spot"}, "allocation"), ({"region": "nl-ams-1"}, "region")]),
    "jarvislabs": (FakeJarvisLabs, "/templates/", None, {"accelerator": sky.accelerators.RTX_A5000()},
                   [({"allocation": 0.5}, "allocation"), ({"region": "mars-1"}, "region")]),
    "massedcompute": (FakeMassedCompute, "/instance/launch", None, {"accelerator": sky.accelerators.RTX_A6000()},
                      [({"allocation": "spot"}, "allocation"), ({"instance_type": "gpu_1x_a6000"}, "instance_type")]),
}
PROVIDERS: dict[str, Callable[..., Any]] = {
    "runpod": sky.RunPod, "vastai": sky.VastAI, "verda": sky.Verda, "digitalocean": sky.DigitalOcean,
    "novita": sky.Novita, "hyperstack": sky.Hyperstack, "tensordock": sky.TensorDock, "vultr": sky.Vultr,
    "lambda": sky.Lambda, "gcp": sky.GCP, "scaleway": sky.Scaleway, "jarvislabs": sky.JarvisLabs,
    "massedcompute": sky.MassedCompute,
}
SPOT_CLOUDS = tuple(name for name in CLOUDS if name in PROVIDERS and getattr(PROVIDERS[name], "spot_market", False))
"""The fake clouds (AWS aside) that sell spot machines: the spot tests run on these only."""
IMAGE_FIELDS = {"runpod": "container_image", "vastai": "docker_image", "novita": "docker_image"}


ORPHAN_TAGS = ("skyward",)
"""The tag every machine of a pool carries on the clouds that list a pool's machines by
tag (Vultr, DigitalOcean, Scaleway: docs/providers.md), written here as documented, not
read from the clients: a client that tags or lists by another tag fails the gc test."""


def orphan_name() -> str:
    """A name of a pool of this machine that is not open."""
    return naming.machine_name(uuid.uuid4().hex, 0)


def fake_cloud(name: str, fake: FakeCloud) -> Cloud:
    _, path, image_key, pool, refusals = FAKES[name]

    def leftovers(pool_id: str) -> list[str]:
        machines = [f"machine {m.id} ({m.state})" for m in fake.live(pool_id[:12])]
        keys = [f"key {k}" for k, v in fake.keys.items() if pool_id[:12] in v["name"]]
        firewalls = [f"firewall {k}" for k, v in fake.firewalls.items() if pool_id[:12] in v["name"]]
        environments = [f"environment {k}" for k, v in getattr(fake, "environments", {}).items() if pool_id[:12] in v["name"]]
        return machines + keys + firewalls + environments

    def images() -> list[str]:
        return [body[image_key] for body in fake.bodies("POST" if name != "vastai" else "PUT", path)]

    return Cloud(
        name, PROVIDERS[name], pool, [*GENERIC_REFUSALS, *refusals], leftovers,
        lambda: fake.plant(orphan_name(), "planted", tags=ORPHAN_TAGS).id, fake.refuse, fake.refused.clear,
        images if image_key else None, IMAGE_FIELDS.get(name), fake=fake,
    )


@contextlib.contextmanager
def started(name: str, lab: Any) -> Iterator[Cloud]:
    """The cloud ``name`` running, its machines made real in ``lab``, its environment set."""
    from e2e.cloud.conftest import environment

    if name == "aws":
        yield from _aws(lab)
        return
    fake = FAKES[name][0]()
    fake.use_subnet(lab.cidr)
    fake.start()
    harness = Harness(lab, fake).start()
    try:
        with environment(fake.env()):
            cloud = fake_cloud(name, fake)
            cloud.harness = harness
            yield cloud
    finally:
        harness.stop()
        fake.stop()
    late = fake.unreported()
    assert not late, f"exchanges with the fake of {name} its API description does not allow:\n{summary(late)}"


def _aws(lab: Any) -> Iterator[Cloud]:
    from cloud.aws_emulator import AWSEmulator
    from e2e.cloud.conftest import environment

    from skyward.providers.aws import session

    with AWSEmulator() as aws, environment(aws.env()):
        session._sessions.clear()
        machines = Machines(aws, lab).start()
        subnet = machines.subnet()
        ec2 = aws.client("ec2")
        refused: list[str] = []

        def leftovers(pool_id: str) -> list[str]:
            tag = [{"Name": "tag:skyward:pool", "Values": [pool_id]}]
            live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
            return (
                [i["InstanceId"] for r in ec2.describe_instances(Filters=tag + live)["Reservations"] for i in r["Instances"]]
                + [g["GroupId"] for g in ec2.describe_security_groups(Filters=tag)["SecurityGroups"]]
                + [k["KeyName"] for k in ec2.describe_key_pairs(Filters=tag)["KeyPairs"]]
            )

        def plant() -> str:
            tags = [{"Key": "skyward:pool", "Value": "planted"}, {"Key": "skyward:owner", "Value": "someone@elsewhere"},
                    {"Key": "skyward:expires", "Value": "2020-01-01T00:00:00Z"}]
            image = ec2.describe_images(Owners=["099720109477"])["Images"][0]["ImageId"]
            return str(ec2.run_instances(
                ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1, SubnetId=subnet,
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )["Instances"][0]["InstanceId"])

        def refuse_all() -> None:
            for offer in sky.AWS().offers(sky.Spec(provider=sky.AWS(), vcpus=2))[:8]:
                aws.refuse(offer.instance_type)
                refused.append(offer.instance_type)

        def allow_all() -> None:
            aws._refusals.clear()

        cloud = Cloud(
            "aws", lambda **kw: sky.AWS(subnet_id=subnet, use_private_ip=True, username="root", **kw), {"vcpus": 2},
            GENERIC_REFUSALS, leftovers, plant, refuse_all, allow_all, harness=machines,
        )
        try:
            yield cloud
        finally:
            machines.stop()
            session._sessions.clear()
