"""Machines of a fake cloud made real: every machine a ``MachineSource`` reports booting
becomes a test host (tests/hosts.py) at the address the cloud gave it, accepting the
machine's key; a machine the cloud ended has its host taken away; a host that shuts
itself down (its dead-man switch) has its machine ended by the cloud, as EC2 does for
``InstanceInitiatedShutdownBehavior=terminate``.

``Harness(lab, *sources)`` serves any number of clouds at once (the local AWS through
``AWSSource``, the fakes of tests/cloud/fake_*.py directly). ``Machines(aws, lab)`` is the
AWS harness with EC2 helpers; ``interrupt`` is a spot interruption there.

The emulator's VPC subnet is the lab's, so the addresses handed out are ones our
namespaces hold; nothing ever dials an address no test host holds.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from cloud.aws_emulator import AWSEmulator
from hosts import HostLab, TestHost

POLL = 0.2


class MachineSource(Protocol):
    """A cloud whose machines the harness makes real."""

    def booting(self) -> list[tuple[str, str, str]]:
        """(machine id, address, authorized public key) of machines that need a host."""

    def ended(self) -> set[str]:
        """Ids of machines the cloud ended (their hosts go)."""

    def started(self, machine_id: str) -> None:
        """The machine's host is up: the cloud reports it running."""

    def halt(self, machine_id: str) -> None:
        """The machine shut itself down: the cloud ends it."""


class Harness:
    """Keeps the lab's hosts in step with the sources' machines (a thread)."""

    def __init__(self, lab: HostLab, *sources: MachineSource) -> None:
        self.lab = lab
        self.sources = list(sources)
        self.hosts: dict[str, TestHost] = {}
        self.halted: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cloud-machines", daemon=True)

    def start(self) -> Harness:
        self._thread.start()
        return self

    def wait_for(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {timeout:g}s (harness errors: {self.errors})")
            time.sleep(POLL)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        with self._lock:
            hosts, self.hosts = list(self.hosts.values()), {}
        for host in hosts:
            self.lab.remove(host)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for source in self.sources:
                try:
                    self._step(source)
                except Exception as exc:  # kept for the test's error message; the loop goes on
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(POLL)

    def _step(self, source: MachineSource) -> None:
        for machine_id, address, key in source.booting():
            if machine_id not in self.hosts and key:
                host = self.lab.add(address, key)
                with self._lock:
                    self.hosts[machine_id] = host
                source.started(machine_id)
        for machine_id in source.ended():
            with self._lock:
                host = self.hosts.pop(machine_id, None)
            if host is not None:
                self.lab.remove(host)
        with self._lock:
            hosts = list(self.hosts.items())
        for machine_id, host in hosts:
            if machine_id not in self.halted and any(request.startswith("-h") for request in host.halted()):
                self.halted.append(machine_id)
                source.halt(machine_id)


class AWSSource:
    """The local AWS's instances as a MachineSource."""

    def __init__(self, aws: AWSEmulator) -> None:
        self.ec2 = aws.client("ec2")
        self._started: set[str] = set()

    def _instances(self) -> list[dict[str, Any]]:
        return [i for r in self.ec2.describe_instances()["Reservations"] for i in r["Instances"]]

    def booting(self) -> list[tuple[str, str, str]]:
        found = []
        for instance in self._instances():
            if instance["State"]["Name"] == "running" and instance.get("KeyName") and instance["InstanceId"] not in self._started:
                key = self.ec2.describe_key_pairs(KeyNames=[instance["KeyName"]], IncludePublicKey=True)["KeyPairs"][0]
                found.append((instance["InstanceId"], instance["PrivateIpAddress"], key["PublicKey"]))
        return found

    def ended(self) -> set[str]:
        return {i["InstanceId"] for i in self._instances() if i["State"]["Name"] in ("shutting-down", "terminated")}

    def started(self, machine_id: str) -> None:
        """EC2 reports the instance running already."""
        self._started.add(machine_id)

    def halt(self, machine_id: str) -> None:
        self.ec2.terminate_instances(InstanceIds=[machine_id])


class Machines(Harness):
    """The AWS harness, with EC2 helpers for the tests."""

    def __init__(self, aws: AWSEmulator, lab: HostLab) -> None:
        super().__init__(lab, AWSSource(aws))
        self.aws = aws
        self.ec2 = aws.client("ec2")

    def subnet(self) -> str:
        """A VPC and subnet in the lab's address range; the subnet id."""
        vpc = self.ec2.create_vpc(CidrBlock=self.lab.cidr)["Vpc"]["VpcId"]
        return str(self.ec2.create_subnet(VpcId=vpc, CidrBlock=self.lab.cidr)["Subnet"]["SubnetId"])

    def interrupt(self, instance_id: str) -> None:
        """A spot interruption: the instance ends, its machine is gone at once."""
        self.ec2.terminate_instances(InstanceIds=[instance_id])
        with self._lock:
            host = self.hosts.pop(instance_id, None)
        if host is not None:
            self.lab.remove(host)

    def running(self, **tags: str) -> list[dict[str, Any]]:
        """Instances not terminated, optionally with the given tags."""
        filters = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        filters += [{"Name": f"tag:{key}", "Values": [value]} for key, value in tags.items()]
        return [i for r in self.ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]
