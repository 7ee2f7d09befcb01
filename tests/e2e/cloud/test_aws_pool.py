"""Whole pools on the local AWS: EC2 instances (moto) that are real test hosts, reached
by their private addresses, bootstrapped and driven like SSH hosts. Afterwards EC2 holds
nothing of the pool, also after Ctrl-C, and after SIGKILL of the client the dead-man
switch shuts the machines down and ``sky gc`` finds the key pair and group left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cloud.aws_emulator import AWSEmulator
from cloud.machines import Machines
from e2e.cloud import rotation
from terminal import like_a_terminal

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def where() -> tuple[int, str]:
    info = sky.instance_info()  # no assert here: pytest rewrites asserts, and nodes have no pytest
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.peers[info.node].private_ip


@sky.function
def count_up() -> int:
    return sky.counter("hits", consistency="strong").increment()


def provider(subnet: str) -> sky.AWS:
    return sky.AWS(subnet_id=subnet, use_private_ip=True, username="root")


def leftovers(aws: AWSEmulator, pool_id: str) -> dict[str, list[str]]:
    ec2 = aws.client("ec2")
    tag = [{"Name": "tag:skyward:pool", "Values": [pool_id]}]
    live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}]
    return {
        "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=tag + live)["Reservations"] for i in r["Instances"]],
        "groups": [g["GroupId"] for g in ec2.describe_security_groups(Filters=tag)["SecurityGroups"]],
        "keys": [k["KeyName"] for k in ec2.describe_key_pairs(Filters=tag)["KeyPairs"]],
    }


NOTHING = {"instances": [], "groups": [], "keys": []}


@pytest.fixture(scope="module")
def subnet(machines: Machines) -> str:
    return machines.subnet()


def test_a_three_node_pool_runs_and_leaves_nothing(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    provisioned: list[sky.InstanceProvisioned] = []
    costs: list[sky.CostFinal] = []
    pool = sky.Compute(provider=provider(subnet), nodes=3, disk_gb=20, region="us-east-1", options=OPTIONS)
    pool.on(sky.InstanceProvisioned, provisioned.append)
    pool.on(sky.CostFinal, costs.append)
    with pool:
        assert square(7) >> pool == 49
        assert sorted(node for node, _ in where() @ pool) == [0, 1, 2]
        assert (square(3) & square(4)) >> pool == (9, 16)
        assert (square(12) > pool).result() == 144
        assert pool.map(square, range(100)) == [x * x for x in range(100)]
        assert sorted(count_up() @ pool) == [1, 2, 3]
        assert pool.counter("hits", consistency="strong").value == 3
        assert len(machines.running(**{"skyward:pool": pool.id})) == 3
        addresses = {address for _, address in where() @ pool}
        assert addresses <= {host.address for host in machines.hosts.values()}
    assert leftovers(aws, pool.id) == NOTHING
    started = aws.run_requests[-1]  # Spec.disk_gb: the root volume's size
    assert started["BlockDeviceMapping.1.Ebs.VolumeSize"] == "20" and started["BlockDeviceMapping.1.DeviceName"]
    assert {(e.provider, e.instance_type, e.spot) for e in provisioned} == {("aws", "t3.medium", True)}
    assert all(e.price_spot == pytest.approx(0.0125 * 0.96) and e.price_on_demand == pytest.approx(0.0416) for e in provisioned)
    assert costs and costs[0].hourly_rate == pytest.approx(3 * 0.0125 * 0.96) and costs[0].spot_count == 3


def test_a_spec_without_capacity_falls_back_to_the_next(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    aws.refuse("p4d.24xlarge")
    errors: list[sky.Error] = []
    first = sky.Spec(provider=provider(subnet), accelerator=sky.accelerators.A100(memory="40GB"))
    second = sky.Spec(provider=provider(subnet), vcpus=2)
    pool = sky.Compute(first, second, options=OPTIONS.with_(selection="first"))
    pool.on(sky.Error, errors.append)
    with pool:
        assert pool.spec is second
        assert square(5) >> pool == 25
    assert any("InsufficientInstanceCapacity" in e.message for e in errors)
    assert leftovers(aws, pool.id) == NOTHING


SCRIPT = """
import sys, time
import skyward as sky

@sky.function
def nap():
    print("napping", flush=True)
    time.sleep(300)

options = sky.Options(console=False, logging=False, ssh_retry_interval=1)
provider = sky.AWS(subnet_id={subnet!r}, use_private_ip=True, username="root")
with sky.Compute(provider=provider, nodes=2, ttl={ttl}, options=options) as pool:
    print("READY", pool.id, flush=True)
    nap() >> pool
"""


def start_client(subnet: str, ttl: int, tmp: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """The client script, its temporary files under ``tmp`` when given."""
    env = {**os.environ, "TMPDIR": str(tmp)} if tmp is not None else os.environ.copy()
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT.format(subnet=subnet, ttl=ttl))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env,
        preexec_fn=like_a_terminal,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("READY"):
            return process, line.split()[1]
    process.wait(10)
    raise AssertionError("the client never got its pool:\n" + "".join(lines[-40:]))


def test_ctrl_c_tears_everything_down(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    process, pool_id = start_client(subnet, ttl=600)
    try:
        machines.wait_for(lambda: len(machines.running(**{"skyward:pool": pool_id})) == 2, 30, "two instances")
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert leftovers(aws, pool_id) == NOTHING, output[-3000:]


def test_a_killed_client_leaves_machines_that_shut_themselves_down(
    aws: AWSEmulator, machines: Machines, subnet: str, tmp_path: Path
) -> None:
    process, pool_id = start_client(subnet, ttl=2, tmp=tmp_path)
    ids = [i["InstanceId"] for i in machines.running(**{"skyward:pool": pool_id})]
    files = Path(os.environ["SKYWARD_HOME"]) / "pools" / pool_id
    assert {path.suffix or path.name for path in files.iterdir()} == {".pem", "known_hosts"}
    process.kill()
    process.wait(10)
    machines.wait_for(lambda: not machines.running(**{"skyward:pool": pool_id}), 90, "the dead-man switch")
    assert set(ids) <= set(machines.halted), "each instance shut itself down"
    found = sky.gc(delete=True)
    mine = {(o.kind, o.pool) for o in found}
    assert ("security-group", pool_id) in mine and ("key-pair", pool_id) in mine
    assert leftovers(aws, pool_id) == NOTHING
    assert not files.exists() and not files.with_suffix(".json").exists(), "sky.gc left the dead pool's files"


def test_gc_finds_and_removes_a_planted_orphan(aws: AWSEmulator, machines: Machines, subnet: str) -> None:
    ec2 = aws.client("ec2")
    tags = [{"Key": "skyward:pool", "Value": "planted"}, {"Key": "skyward:owner", "Value": "someone@elsewhere"},
            {"Key": "skyward:expires", "Value": "2020-01-01T00:00:00Z"}]
    image = ec2.describe_images(Owners=["099720109477"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(
        ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1, SubnetId=subnet,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    group = ec2.create_security_group(
        GroupName="planted", Description="planted", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    listed = run_cli("gc", "--json")
    assert {(row["kind"], row["id"]) for row in listed} >= {("instance", instance), ("security-group", group)}
    assert next(row for row in listed if row["id"] == instance)["hourly_price"] == pytest.approx(0.0104)
    run_cli("gc", "--yes")
    assert leftovers(aws, "planted") == NOTHING
    assert run_cli("gc", "--json") == []


def run_cli(*args: str) -> Any:
    import json

    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "sky"), *args], capture_output=True, text=True,
        timeout=120, env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout) if "--json" in args else result.stdout


@sky.function
def node_pid() -> int:
    return os.getpid()


@rotation.in_turn(2)
def test_a_killed_daemons_kept_pool_is_taken_over_and_ends_leaving_nothing(
    aws: AWSEmulator, machines: Machines, subnet: str
) -> None:
    """The pool daemon dies while it keeps an AWS pool; the next script's daemon takes the
    pool over (the same instances and node processes), and
    `sky down` removes it, confirmed."""
    import psutil

    from skyward.providers import daemon_client

    kept = OPTIONS.with_(keep_alive=600.0)
    pool = sky.Compute(provider=provider(subnet), nodes=2, region="us-east-1", options=kept)
    with pool:
        first = sorted(node_pid() @ pool)
    try:
        [held] = daemon_client.kept_pools()
        instances = [i["InstanceId"] for i in machines.running(**{"skyward:pool": held.pool_id})]
        os.kill(held.daemon_pid, signal.SIGKILL)
        machines.wait_for(lambda: not psutil.pid_exists(held.daemon_pid), 10, "the daemon's death")
        again = sky.Compute(provider=provider(subnet), nodes=2, region="us-east-1", options=kept)
        with again:
            assert sorted(node_pid() @ again) == first, "not the same node processes"
        [taken] = daemon_client.kept_pools()
        assert taken.pool_id == held.pool_id and taken.daemon_pid != held.daemon_pid
        assert [i["InstanceId"] for i in machines.running(**{"skyward:pool": held.pool_id})] == instances
    finally:
        daemon_client.end_pools("")
        daemon_client.stop_all()
    assert leftovers(aws, held.pool_id) == NOTHING
