"""``sky.AWS(region=...)``: EC2 instances created for the pool and destroyed after it.

Opening a pool prices the instance types that satisfy the Spec (``offers``), then starts
the cheapest allowed one in the market ``Spec.allocation`` asks for, falling back to the
next offer when EC2 has no capacity or quota for it; the instances then go down the same
remote path as SSH hosts (bootstrap, Ray, the head relay). Closing terminates them,
confirms it, and deletes the pool's key pair and security group. See docs/aws.md.
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import socket
import threading
import time
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.accelerator_catalog import identify
from skyward.core.allocation import minimum_spot
from skyward.core.errors import NoAvailableProviderError
from skyward.core.validation import fail
from skyward.image.image import local_python
from skyward.model.nodes import NodeHandle, SSHEndpoint
from skyward.model.spec import Options, Spec
from skyward.providers import registry
from skyward.providers.aws import machines
from skyward.providers.aws.catalog import InstanceType, candidates, instance_types
from skyward.providers.aws.images import find_image, root_device
from skyward.providers.aws.membership import EC2Machines
from skyward.providers.aws.prices import LIVE, prices, snapshot, snapshot_types
from skyward.providers.aws.session import AWSError, NoCapacityError, client, explain
from skyward.providers.base import LaunchedCluster, Offer
from skyward.providers.cloud import fields
from skyward.providers.cloud.errors import CloudAnswerError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.orphans import Orphan
from skyward.providers.ssh.connection import BOOTING_SSH_TIMEOUT, KnownHosts
from skyward.providers.ssh.provider import check_remote_spec
from skyward.storage.client import Storage
from skyward.storage.presets import S3

DEFAULT_PROVISION_TIMEOUT = 600.0
MAX_OFFERS_TRIED = 6
PUBLIC_ADDRESS_URL = "https://checkip.amazonaws.com"


@dataclass(frozen=True, slots=True)
class AWS:
    """EC2 in ``region``. ``ami`` overrides the image lookup; ``subnet_id`` picks the
    subnet (default: the default VPC's first default subnet); ``use_private_ip`` reaches
    the nodes by their private addresses (the client runs inside the VPC or a VPN);
    ``ssh_cidr`` is who may SSH in (default: this machine's address only); ``username``
    is the image's login user. ``use_ssm`` (Session Manager) is not implemented."""

    name: ClassVar[str] = "aws"
    priced: ClassVar[bool] = True
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset({"ssh_timeout", "bootstrap_timeout", "ssh_retry_interval"})

    region: str = "us-east-1"
    use_ssm: bool = False
    ami: str | None = None
    subnet_id: str | None = None
    use_private_ip: bool = False
    ssh_cidr: str | None = None
    username: str = "ubuntu"

    def __post_init__(self) -> None:
        for field_name in ("region", "username"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value:
                raise fail("AWS", field_name, value, "give a non-empty string")
        for field_name in ("use_ssm", "use_private_ip"):
            if not isinstance(getattr(self, field_name), bool):
                raise fail("AWS", field_name, getattr(self, field_name), "use True or False")
        refuse_container("AWS", "ami", self.ami)
        if self.ami is not None and (not isinstance(self.ami, str) or not self.ami.startswith("ami-")):
            raise fail("AWS", "ami", self.ami, 'give an AMI id such as "ami-0abc..." or leave it None')
        if self.subnet_id is not None and (not isinstance(self.subnet_id, str) or not self.subnet_id.startswith("subnet-")):
            raise fail("AWS", "subnet_id", self.subnet_id, 'give a subnet id such as "subnet-0abc..." or leave it None')
        if self.ssh_cidr is not None:
            try:
                ipaddress.ip_network(self.ssh_cidr, strict=False)
            except (TypeError, ValueError):
                raise fail("AWS", "ssh_cidr", self.ssh_cidr, 'give a CIDR such as "203.0.113.7/32"') from None

    # ------------------------------------------------------------------ contract

    def validate(self, spec: Spec, options: Options) -> None:
        """Refuse what EC2 pools cannot honour, before anything is created."""
        if self.use_ssm:
            raise NotImplementedError("AWS(use_ssm=True) (Session Manager) is not implemented; use SSH (the default)")
        if spec.image.python_version != local_python():
            raise fail(
                "Image", "python", spec.image.python,
                f"the client runs Python {local_python()} and cloudpickle needs the same minor version on nodes; "
                'use "auto" or run the client with that version',
            )
        if spec.region is not None and spec.region != self.region and not isinstance(spec.region, str):
            raise fail("Spec", "region", spec.region, 'give a region name such as "us-west-2"')
        check_remote_spec(spec, options)

    def offers(self, spec: Spec) -> list[Offer]:
        """Priced instance types that satisfy ``spec`` in its market(s), cheapest first,
        within ``Spec.max_hourly_cost``."""
        return [offer for offer in self._all_offers(spec) if _within(offer, spec)]

    def snapshot_offers(self, spec: Spec) -> list[Offer]:
        """On-demand offers from the snapshot shipped with skyward alone (its instance
        types and prices; no AWS call, no credentials), cheapest first, each with
        ``price_source`` "snapshot DATE"; none for a spot-only Spec. ValueError naming the
        regions the snapshot has when ``spec``'s region is not one of them."""
        region = self._region(spec)
        date, regions = snapshot()
        if region not in regions:
            raise fail("Spec", "region", region, f"skyward's price snapshot of {date} has only {', '.join(regions)}")
        if spec.allocation == "spot" or isinstance(spec.allocation, float):
            return []
        priced = regions[region]
        known = list(snapshot_types())
        kinds = candidates(known, spec) if spec.instance_type is None else [k for k in known if k.name == spec.instance_type]
        found = [
            _offer(kind, priced[kind.name], False, region, priced[kind.name], f"snapshot {date}")
            for kind in kinds if kind.name in priced
        ]
        return sorted((o for o in found if _within(o, spec)), key=lambda o: (o.hourly_price, o.instance_type))

    def default_storage(self, spec: Spec) -> Storage:
        """S3 of the pool's region, opted in to giving the nodes the client's AWS
        credential chain (choosing sky.AWS and its storage is that choice; the chain goes
        to AWS's S3 only): ``Volume(storage=None)`` needs no keys of its own."""
        return S3(region=self._region(spec), ship_client_credentials=True)

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Create the pool's instances and bring them up; everything created is removed
        again if anything fails."""
        region = self._region(spec)
        allowed = self._allowed_offers(spec)
        if spec.node_count.floor == 0:  # an offer fits; no machine until work waits
            from skyward.providers.ssh.sleeping import sleeping

            return sleeping(self.launch, spec, options, pool_id, None)
        resources = machines.PoolResources(region, pool_id)
        renewer = _ExpiryRenewer(resources)
        held = ExitStack()  # what the pool holds; closing it releases all, the newest first
        known_hosts = KnownHosts.for_pool(pool_id, held)  # in the pool's directory, with its SSH key
        registry.register(pool_id, self.name, region)
        held.callback(registry.unregister, pool_id)
        held.callback(machines.release, resources)
        held.callback(renewer.stop)
        try:
            subnet, vpc = self._subnet(region)
            machines.create_access(resources, vpc, self._ssh_cidr(region, subnet))
            timeout = float(options.provision_timeout or DEFAULT_PROVISION_TIMEOUT)
            user_data = boot_script(spec, options)
            offer, plan, handles = self._start(spec, allowed, resources, subnet, timeout, user_data)
            renewer.start()

            def launch_one() -> NodeHandle:
                [started] = _run(spec, offer, plan, 1)
                return self._handle(resources, offer, started)

            grow = EC2Machines(region, launch_one)
            held.callback(grow.close)
        except BaseException:
            held.close()
            raise
        # Ray loads when a pool launches, not in a script that adopts a kept pool
        from skyward.providers.ssh.launch import launch_on_created

        holdings = EC2Holdings(resources)
        return launch_on_created(handles, spec, options, pool_id, known_hosts, held, grow, holdings)

    # ------------------------------------------------------------------ gc

    def orphans(self) -> list[Orphan]:
        """Instances, security groups and key pairs tagged by skyward in this region that
        no live pool owns."""
        ec2 = client("ec2", self.region)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        me = machines.owner()
        found: list[Orphan] = []
        has_tag = [{"Name": "tag-key", "Values": [machines.TAG_POOL]}]
        try:
            reservations = fields.objects(ec2.describe_instances(
                Filters=[*has_tag, {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
            ), "Reservations")
            groups = fields.objects(ec2.describe_security_groups(Filters=has_tag), "SecurityGroups")
            keys = fields.objects(ec2.describe_key_pairs(Filters=has_tag), "KeyPairs")
        except Exception as exc:
            raise explain(exc, "looking for skyward's resources", self.region) from exc
        instances = machines.instances_of(reservations)
        costs = prices(self.region, sorted({fields.text(i, "InstanceType") for i in instances})) if instances else {}
        for item, kind, key in (
            *((i, "instance", "InstanceId") for i in instances),
            *((g, "security-group", "GroupId") for g in groups),
            *((k, "key-pair", "KeyName") for k in keys),
        ):
            tags = {fields.text(t, "Key"): fields.text(t, "Value", "") for t in fields.objects(item, "Tags")}
            pool = tags.get(machines.TAG_POOL, "")
            reason = _orphan_reason(tags, pool, now, me)
            if reason is None:
                continue
            launched, price = None, 0.0
            if kind == "instance":
                launched = _launched(item)
                cost = costs.get(fields.text(item, "InstanceType"))
                spot = item.get("InstanceLifecycle") == "spot"
                price = ((cost.spot if spot else cost.ondemand) or 0.0) if cost else 0.0
            found.append(Orphan(self.name, self.region, kind, fields.text(item, key), pool, reason, launched, price))
        return found

    def remove(self, orphans: Sequence[Orphan]) -> None:
        """Terminate the orphan instances (confirmed), then delete the groups and keys."""
        by_pool: dict[str, machines.PoolResources] = {}
        for orphan in orphans:
            resources = by_pool.setdefault(orphan.pool, machines.PoolResources(self.region, orphan.pool))
            if orphan.kind == "instance":
                resources.instances.append(orphan.id)
            elif orphan.kind == "security-group":
                resources.group_id = orphan.id
            elif orphan.kind == "key-pair":
                resources.key_name = orphan.id
        for resources in by_pool.values():
            machines.release(resources)

    # ------------------------------------------------------------------ helpers

    def _region(self, spec: Spec) -> str:
        return spec.region or self.region

    def _all_offers(self, spec: Spec) -> list[Offer]:
        region = self._region(spec)
        kinds = candidates(instance_types(region), spec) if spec.instance_type is None else _pinned(region, spec.instance_type)
        priced = prices(region, [kind.name for kind in kinds])
        found = []
        for kind in kinds:
            cost = priced[kind.name]
            if spec.allocation != "on-demand" and kind.spot and cost.spot is not None:
                found.append(_offer(kind, cost.spot, True, region, cost.ondemand, LIVE))
            if spec.allocation != "spot" and not isinstance(spec.allocation, float) and cost.ondemand is not None:
                found.append(_offer(kind, cost.ondemand, False, region, cost.ondemand, cost.ondemand_source))
        if spec.allocation == "spot-if-available":  # each type's spot first, then its on-demand
            cheapest: dict[str, float] = {}
            for offer in found:
                cheapest[offer.instance_type] = min(cheapest.get(offer.instance_type, math.inf), offer.hourly_price)
            found.sort(key=lambda offer: (cheapest[offer.instance_type], offer.instance_type, not offer.spot))
        else:
            found.sort(key=lambda offer: (offer.hourly_price, offer.instance_type, offer.spot))
        return found

    def _allowed_offers(self, spec: Spec) -> list[Offer]:
        every = self._all_offers(spec)
        allowed = [offer for offer in every if _within(offer, spec)]
        if allowed:
            return allowed
        what = _describe(spec)
        if not every:
            raise NoAvailableProviderError(
                f"AWS has no instance type in {self._region(spec)} that satisfies {what} with a price in its "
                f"allocation ({spec.allocation!r}); change the Spec, the region or the allocation"
            )
        cheapest = every[0]
        raise NoAvailableProviderError(
            f"no AWS offer in {self._region(spec)} for {what} is within Spec.max_hourly_cost="
            f"{spec.max_hourly_cost:g} per node: the cheapest is {cheapest.instance_type} "
            f"({'spot' if cheapest.spot else 'on-demand'}) at ${cheapest.hourly_price:.4f}/h; raise the cap"
        )

    def _start(
        self, spec: Spec, offers: list[Offer], resources: machines.PoolResources, subnet: str, timeout: float,
        user_data: str,
    ) -> tuple[Offer, _Plan, list[NodeHandle]]:
        """Start the nodes the pool opens with (``Nodes.floor``) on the first offer EC2
        has room for; that offer, how its instances were started (for the ones that join
        later) and the nodes."""
        count = spec.node_count.floor
        kinds = {kind.name: kind for kind in instance_types(resources.region)}
        refused: list[str] = []
        for offer in offers[:MAX_OFFERS_TRIED]:
            image = self.ami or find_image(resources.region, kinds[offer.instance_type])
            disk = (root_device(resources.region, image), spec.disk_gb) if spec.disk_gb is not None else None
            plan = _Plan(resources, offer.instance_type, image, subnet, timeout, user_data, disk)
            try:
                launched = _run(spec, offer, plan, count)
            except NoCapacityError as exc:
                refused.append(f"{offer.instance_type} ({'spot' if offer.spot else 'on-demand'}): {exc.code}")
                continue
            return offer, plan, [self._handle(resources, offer, node) for node in launched]
        raise NoCapacityError(
            f"AWS had no capacity in {resources.region} for any of the {len(refused)} cheapest offers: "
            + "; ".join(refused) + ". Try another region, a different accelerator or allocation, or later",
            "InsufficientInstanceCapacity",
        )

    def _handle(self, resources: machines.PoolResources, offer: Offer, node: machines.Launched) -> NodeHandle:
        address = node.private_ip if self.use_private_ip else node.public_ip
        if address is None:
            raise AWSError(
                f"instance {node.id} has no public address: use a subnet that assigns public IPs, or "
                "AWS(use_private_ip=True) when this machine can reach the VPC"
            )
        spot = node.spot or offer.spot
        price = offer.hourly_price if spot == offer.spot else (offer.ondemand_price or offer.hourly_price)
        assert resources.key_path is not None
        return NodeHandle(
            node.id, node.private_ip, SSHEndpoint(address, 22, self.username, str(resources.key_path)),
            offer.instance_type, price, offer.ondemand_price, spot, resources.region,
        )

    def _subnet(self, region: str) -> tuple[str, str]:
        """``(subnet id, vpc id)`` to start the nodes in."""
        ec2 = client("ec2", region)
        try:
            if self.subnet_id is not None:
                subnets = fields.objects(ec2.describe_subnets(SubnetIds=[self.subnet_id]), "Subnets")
            else:
                defaults = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
                subnets = fields.objects(defaults, "Subnets")
        except Exception as exc:
            raise explain(exc, "looking up the subnet", region) from exc
        if not subnets:
            raise AWSError(f"no default subnet in {region}: create a default VPC or pass sky.AWS(subnet_id=...)")
        subnet = sorted(subnets, key=lambda s: fields.text(s, "AvailabilityZone"))[0]
        return fields.text(subnet, "SubnetId"), fields.text(subnet, "VpcId")

    def _ssh_cidr(self, region: str, subnet: str) -> str:
        """Who may SSH to the nodes: ``ssh_cidr``, else this machine's address as the
        nodes will see it."""
        if self.ssh_cidr is not None:
            return self.ssh_cidr
        if self.use_private_ip:
            described = fields.objects(client("ec2", region).describe_subnets(SubnetIds=[subnet]), "Subnets")
            if not described:
                raise AWSError(f"subnet {subnet} does not exist in {region}; check AWS(subnet_id=...)")
            block = fields.text(described[0], "CidrBlock")
            probe = str(next(ipaddress.ip_network(block).hosts()))
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((probe, 22))  # no packet is sent: this only picks the route
                return f"{s.getsockname()[0]}/32"
        try:
            with urllib.request.urlopen(PUBLIC_ADDRESS_URL, timeout=5) as response:
                address = response.read().decode().strip()
            return f"{ipaddress.ip_address(address)}/32"
        except Exception as exc:
            raise AWSError(
                f"could not learn this machine's public address from {PUBLIC_ADDRESS_URL} ({exc}), which the "
                "pool's security group admits for SSH; pass sky.AWS(ssh_cidr='x.x.x.x/32')"
            ) from None


@dataclass(frozen=True, slots=True)
class _Plan:
    """How the pool's instances are started: everything but their count and market."""

    resources: machines.PoolResources
    instance_type: str
    image: str
    subnet: str
    timeout: float
    user_data: str
    disk: tuple[str, int] | None


def _run(spec: Spec, offer: Offer, plan: _Plan, count: int) -> list[machines.Launched]:
    """``count`` running instances of ``offer`` (a spot share mixes in on-demand ones
    when spot capacity is short); NoCapacityError when EC2 cannot."""
    try:
        return _launch_group(plan, count, offer.spot)
    except NoCapacityError:
        if not (offer.spot and isinstance(spec.allocation, float)):
            raise
    spot = minimum_spot(spec.allocation, count)
    return _launch_group(plan, spot, True) + _launch_group(plan, count - spot, False)


def _launch_group(plan: _Plan, count: int, spot: bool) -> list[machines.Launched]:
    if count == 0:
        return []
    region = plan.resources.region
    ids = machines.run_instances(
        plan.resources, plan.instance_type, plan.image, count, spot, plan.subnet, plan.user_data, plan.disk
    )
    try:
        return machines.wait_running(region, ids, plan.timeout)
    except AWSError as exc:
        if spot and "ended while starting" in str(exc):  # EC2 took the spot capacity back
            client("ec2", region).terminate_instances(InstanceIds=ids)
            raise NoCapacityError(str(exc), "SpotCapacityReclaimed") from exc
        raise


def _offer(kind: InstanceType, price: float, spot: bool, region: str, ondemand: float | None, source: str) -> Offer:
    seen = identify(kind.accelerator) if kind.accelerator else None
    return Offer(
        provider="aws", instance_type=kind.name, vcpus=float(kind.vcpus), memory_gb=kind.memory_gb,
        hourly_price=price, spot=spot, region=region,
        accelerator=seen.model.name if seen is not None else kind.accelerator,
        accelerator_count=float(kind.accelerator_count), accelerator_memory_gb=kind.accelerator_memory_gb,
        architecture=kind.architecture, ondemand_price=ondemand, price_source=source,
    )


def _pinned(region: str, name: str) -> list[InstanceType]:
    """``Spec.instance_type``: that type as it is; ValueError naming it when EC2 has no such type here."""
    found = [kind for kind in instance_types(region) if kind.name == name]
    if not found:
        raise fail("Spec", "instance_type", name, f"EC2 has no such instance type in {region}; check the name")
    return found


def _within(offer: Offer, spec: Spec) -> bool:
    return spec.max_hourly_cost is None or offer.hourly_price <= spec.max_hourly_cost


def _describe(spec: Spec) -> str:
    parts = [repr(spec.accelerator.name) if spec.accelerator else "CPU only"]
    for field_name in ("vcpus", "memory_gb", "architecture"):
        if getattr(spec, field_name) is not None:
            parts.append(f"{field_name}={getattr(spec, field_name)!r}")
    return ", ".join(parts)


def _launched(instance: JsonObject) -> float:
    """When EC2 started ``instance`` (epoch seconds)."""
    when = instance.get("LaunchTime")
    if not isinstance(when, datetime.datetime):
        raise CloudAnswerError(f"instance {instance.get('InstanceId')}'s LaunchTime is {when!r:.100}, not a time")
    return when.timestamp()


def _orphan_reason(tags: dict[str, str], pool: str, now: str, me: str) -> str | None:
    if tags.get(machines.TAG_EXPIRES, "9999") < now:
        return f"its pool stopped renewing it (expired {tags[machines.TAG_EXPIRES]})"
    if tags.get(machines.TAG_OWNER) == me and not registry.is_live(pool):
        return "its pool is not open on this machine any more"
    return None


def boot_script(spec: Spec, options: Options) -> str:
    """User data: a machine no client takes over shuts itself down (and so terminates)."""
    budget = float(options.bootstrap_timeout or spec.image.bootstrap_timeout) + BOOTING_SSH_TIMEOUT + spec.ttl + 600
    minutes = max(10, math.ceil(budget / 60))
    return f"#!/bin/bash\nshutdown -h +{minutes} 'skyward: no client took this instance over' || true\n"


@dataclass
class EC2Holdings:
    """A kept pool's instances, security group and key pair, as the pool daemon's
    successor keeps them (renewing their expiry tag) and releases them."""

    resources: machines.PoolResources
    renewer: _ExpiryRenewer | None = None
    """Set by ``keep`` (then it no longer pickles)."""

    def keep(self) -> None:
        self.renewer = _ExpiryRenewer(self.resources)
        self.renewer.start()

    def release(self) -> None:
        if self.renewer is not None:
            self.renewer.stop()
        machines.release(self.resources)


class _ExpiryRenewer:
    """Pushes the pool's ``skyward:expires`` tag forward while the pool lives."""

    def __init__(self, resources: machines.PoolResources) -> None:
        self._resources = resources
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="skyward-aws-expiry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(machines.EXPIRY_WINDOW / 4):
            try:
                machines.renew_expiry(self._resources)
            except Exception:  # renewed next time; the window is long
                pass

