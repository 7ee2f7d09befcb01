"""What one pool creates in EC2, and taking all of it down again.

Per pool: a key pair (an ed25519 key made on the client, its private half in
``$SKYWARD_HOME/keys``, mode 0600), a security group that admits SSH only from the
client's address, and the instances. Everything is tagged ``skyward:pool`` (the pool
id), ``skyward:owner`` (user@host of the client) and ``skyward:expires`` (a time the
client keeps pushing forward while it runs), so ``sky.gc`` can find what no live pool
owns. Instances shut themselves down if no client ever reaches them (``shutdown -h`` at
boot, cancelled by the node's watchdog) and are created with
``InstanceInitiatedShutdownBehavior=terminate``, so a shutdown ends the billing.

``release`` terminates the instances and waits until EC2 reports them terminated (a
security group in use cannot be deleted), then deletes the group and the key pair,
retrying what AWS refuses for a while; what is still there after that is named in a
``TeardownError``.
"""

from __future__ import annotations

import base64
import datetime
import getpass
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from skyward.core.private_dir import create_private_file
from skyward.providers import registry
from skyward.providers.aws.session import EC2, AWSError, client, error_code, explain
from skyward.providers.cloud import fields
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.machines import confirm_released

TAG_POOL = "skyward:pool"
TAG_OWNER = "skyward:owner"
TAG_EXPIRES = "skyward:expires"
EXPIRY_WINDOW = 3600.0
"""How far ahead a running pool's ``skyward:expires`` tag points; renewed every quarter."""
POLL = 2.0
TERMINATE_TIMEOUT = 600.0


def owner() -> str:
    """Who creates resources from this machine: ``user@host``."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def expiry(seconds: float = EXPIRY_WINDOW) -> str:
    """An ISO-8601 UTC time ``seconds`` from now."""
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Launched:
    """One instance EC2 started for the pool."""

    id: str
    private_ip: str
    public_ip: str | None
    spot: bool


@dataclass
class PoolResources:
    """What EC2 holds for one pool, as created so far."""

    region: str
    pool_id: str
    key_name: str = ""
    key_path: Path | None = None
    group_id: str = ""
    instances: list[str] = field(default_factory=list)

    def tags(self, name: str) -> list[dict[str, str]]:
        return [
            {"Key": TAG_POOL, "Value": self.pool_id}, {"Key": TAG_OWNER, "Value": owner()},
            {"Key": TAG_EXPIRES, "Value": expiry()}, {"Key": "Name", "Value": name},
        ]

    def tag_spec(self, kind: str, name: str) -> dict[str, object]:
        return {"ResourceType": kind, "Tags": self.tags(name)}


def create_access(resources: PoolResources, vpc_id: str, ssh_cidr: str) -> None:
    """The pool's key pair and security group (SSH from ``ssh_cidr`` only)."""
    from skyward.providers.ssh.asyncssh_import import asyncssh

    ec2 = client("ec2", resources.region)
    name = f"skyward-{resources.pool_id[:12]}"
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = registry.files_of(resources.pool_id) / f"{name}.pem"
    create_private_file(str(path), key.export_private_key())
    resources.key_path = path
    try:
        ec2.import_key_pair(
            KeyName=name, PublicKeyMaterial=key.export_public_key(), TagSpecifications=[resources.tag_spec("key-pair", name)]
        )
        resources.key_name = name
        group = ec2.create_security_group(
            GroupName=name, Description=f"skyward pool {resources.pool_id}: SSH from the client only", VpcId=vpc_id,
            TagSpecifications=[resources.tag_spec("security-group", name)],
        )
        resources.group_id = fields.text(group, "GroupId")
        ec2.authorize_security_group_ingress(
            GroupId=resources.group_id,
            IpPermissions=[{
                "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                "IpRanges": [{"CidrIp": ssh_cidr, "Description": "skyward client"}],
            }],
        )
        # The pool's nodes talk to each other (Ray) on any port, inside the group only.
        ec2.authorize_security_group_ingress(
            GroupId=resources.group_id,
            IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": resources.group_id}]}],
        )
    except Exception as exc:
        raise explain(exc, "creating the pool's key pair and security group", resources.region) from exc


def run_instances(
    resources: PoolResources, instance_type: str, image: str, count: int, spot: bool, subnet_id: str, user_data: str,
    disk: tuple[str, int] | None = None,
) -> list[str]:
    """Start ``count`` instances (all or none); NoCapacityError when EC2 has no room.
    ``disk``: the root device's name and its size in GB (``Spec.disk_gb``)."""
    ec2 = client("ec2", resources.region)
    name = f"skyward-{resources.pool_id[:12]}"
    request: dict[str, object] = {
        "ImageId": image, "InstanceType": instance_type, "MinCount": count, "MaxCount": count,
        "KeyName": resources.key_name, "SecurityGroupIds": [resources.group_id], "SubnetId": subnet_id,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "UserData": base64.b64encode(user_data.encode()).decode(),
        "TagSpecifications": [resources.tag_spec("instance", name), resources.tag_spec("volume", name)],
    }
    if disk is not None:
        request["BlockDeviceMappings"] = [
            {"DeviceName": disk[0], "Ebs": {"VolumeSize": disk[1], "VolumeType": "gp3", "DeleteOnTermination": True}}
        ]
    if spot:
        request["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    market = "spot" if spot else "on-demand"
    try:
        started = fields.objects(ec2.run_instances(**request), "Instances")
    except Exception as exc:
        raise explain(exc, f"starting {count} {market} {instance_type}", resources.region) from exc
    ids = [fields.text(item, "InstanceId") for item in started]
    resources.instances.extend(ids)
    return ids


def wait_running(region: str, ids: list[str], timeout: float) -> list[Launched]:
    """The instances once every one runs and has its address; AWSError if one ends
    (a spot request EC2 could not keep) or ``timeout`` passes first."""
    ec2 = client("ec2", region)
    deadline = time.monotonic() + timeout
    while True:
        try:
            reservations = fields.objects(ec2.describe_instances(InstanceIds=ids), "Reservations")
        except Exception as exc:
            if error_code(exc) != "InvalidInstanceID.NotFound":  # not visible yet: ask again
                raise explain(exc, "waiting for the instances", region) from exc
            reservations = []
        found = {fields.text(i, "InstanceId"): i for i in instances_of(reservations)}
        ended = [i for i in found.values() if state_of(i) in ("shutting-down", "terminated", "stopped")]
        if ended:
            reason = fields.text(fields.obj(ended[0], "StateReason"), "Message", "") or state_of(ended[0])
            raise AWSError(f"instance {fields.text(ended[0], 'InstanceId')} ended while starting: {reason}")
        running = [i for i in found.values() if state_of(i) == "running" and i.get("PrivateIpAddress")]
        if len(running) == len(ids):
            order = {instance_id: index for index, instance_id in enumerate(ids)}
            running.sort(key=lambda i: order[fields.text(i, "InstanceId")])
            return [
                Launched(
                    fields.text(i, "InstanceId"), fields.text(i, "PrivateIpAddress"),
                    fields.text(i, "PublicIpAddress", "") or None,
                    i.get("InstanceLifecycle") == "spot",
                )
                for i in running
            ]
        if time.monotonic() > deadline:
            raise AWSError(
                f"{len(ids) - len(running)} of {len(ids)} instances were not running within {timeout:g}s; "
                "raise Options.provision_timeout"
            )
        time.sleep(POLL)


def renew_expiry(resources: PoolResources) -> None:
    """Push the pool's ``skyward:expires`` tag forward (the pool is alive)."""
    ids = [*resources.instances, *(x for x in (resources.group_id,) if x)]
    if ids:
        client("ec2", resources.region).create_tags(Resources=ids, Tags=[{"Key": TAG_EXPIRES, "Value": expiry()}])


def release(resources: PoolResources, on_progress: Callable[[str], None] = lambda _: None) -> None:
    """Terminate the instances, confirm it, delete the group and the key pair."""
    ec2 = client("ec2", resources.region)
    left: list[str] = []
    if resources.instances:
        try:
            ec2.terminate_instances(InstanceIds=resources.instances)
            on_progress(f"terminating {len(resources.instances)} instances")
            _wait_terminated(ec2, resources.instances)
        except Exception as exc:
            left.append(f"instances {', '.join(resources.instances)} ({explain(exc, 'terminating', resources.region)})")
    if resources.group_id:
        if not _retry(lambda: ec2.delete_security_group(GroupId=resources.group_id)):
            left.append(f"security group {resources.group_id}")
    if resources.key_name:
        if not _retry(lambda: ec2.delete_key_pair(KeyName=resources.key_name)):
            left.append(f"key pair {resources.key_name}")
    confirm_released(left, resources.key_path, f"in {resources.region}", resources.pool_id, "sky gc")


def instances_of(reservations: list[JsonObject]) -> list[JsonObject]:
    """The instances of ``describe_instances``' reservations."""
    return [instance for reservation in reservations for instance in fields.objects(reservation, "Instances")]


def state_of(instance: JsonObject) -> str:
    """An instance's state name ("pending", "running", ...)."""
    return fields.text(fields.obj(instance, "State"), "Name")


def _wait_terminated(ec2: EC2, ids: list[str]) -> None:
    deadline = time.monotonic() + TERMINATE_TIMEOUT
    while True:
        reservations = fields.objects(ec2.describe_instances(InstanceIds=ids), "Reservations")
        states = [state_of(i) for i in instances_of(reservations)]
        if all(state == "terminated" for state in states):
            return
        if time.monotonic() > deadline:
            raise AWSError(f"instances still {sorted(set(states))} after {TERMINATE_TIMEOUT:g}s")
        time.sleep(POLL)


def _retry(action: Callable[[], object], attempts: int = 30) -> bool:
    """Run ``action`` until it succeeds or says the thing is already gone; False if it
    kept failing (e.g. a group still in use by an instance that is not gone yet)."""
    for _ in range(attempts):
        try:
            action()
            return True
        except Exception as exc:
            if error_code(exc).endswith(".NotFound") or error_code(exc).startswith("InvalidGroup.NotFound"):
                return True
            time.sleep(POLL)
    return False
