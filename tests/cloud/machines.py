"""Instances of the local AWS made real: every instance the emulator reports running
becomes a test host (tests/hosts.py) at the instance's private address, accepting the
instance's key pair; a terminated instance's host is taken away. A host that shuts
itself down (its dead-man switch) gets its instance terminated, as EC2 does for
``InstanceInitiatedShutdownBehavior=terminate``. ``interrupt`` is a spot interruption:
the instance is terminated and its host killed at once.

The emulator's VPC subnet is the lab's, so the addresses moto hands out are ones our
namespaces hold; nothing ever dials an address no test host holds (tests reach nodes by
their private addresses, ``AWS(use_private_ip=True)``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from cloud.aws_emulator import AWSEmulator
from hosts import HostLab, TestHost

POLL = 0.2


class Machines:
    """Keeps the lab's hosts in step with the emulator's instances (a thread)."""

    def __init__(self, aws: AWSEmulator, lab: HostLab) -> None:
        self.aws = aws
        self.lab = lab
        self.ec2 = aws.client("ec2")
        self.hosts: dict[str, TestHost] = {}
        self.halted: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cloud-machines", daemon=True)

    def start(self) -> Machines:
        self._thread.start()
        return self

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
            try:
                self._step()
            except Exception as exc:  # kept for the test's error message; the loop goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(POLL)

    def _step(self) -> None:
        reservations = self.ec2.describe_instances()["Reservations"]
        instances = {i["InstanceId"]: i for r in reservations for i in r["Instances"]}
        for instance_id, instance in instances.items():
            state = instance["State"]["Name"]
            host = self.hosts.get(instance_id)
            if state == "running" and host is None and instance.get("KeyName"):
                key = self.ec2.describe_key_pairs(KeyNames=[instance["KeyName"]], IncludePublicKey=True)["KeyPairs"][0]
                with self._lock:
                    self.hosts[instance_id] = self.lab.add(instance["PrivateIpAddress"], key["PublicKey"])
            elif state in ("shutting-down", "terminated") and host is not None:
                with self._lock:
                    self.hosts.pop(instance_id, None)
                self.lab.remove(host)
            elif host is not None and any(request.startswith("-h") for request in host.halted()):
                self.halted.append(instance_id)
                self.ec2.terminate_instances(InstanceIds=[instance_id])
