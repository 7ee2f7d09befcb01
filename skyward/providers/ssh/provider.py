"""``sky.SSH(hosts=[...])``: machines you already have, reached over SSH.

The first host is node 0, the head. Opening the pool connects to every host (host keys
checked against skyward's own known_hosts, trust on first use) and runs the remote path
every machine-based provider shares (``launch``): hardware checks, bootstrap of the
Image, version checks, Ray, a watchdog per host (``Spec.ttl``) and the head relay.
Closing stops all of it on every host and removes the pool's files (the install cache
under ~/.cache/skyward stays for the next pool).
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.core.validation import check_number, fail
from skyward.engine.membership import Loss
from skyward.image.image import local_python
from skyward.model.nodes import NodeHandle, SSHEndpoint
from skyward.model.spec import Options, Spec
from skyward.providers.base import LaunchedCluster, Offer
from skyward.providers.ssh.connection import KnownHosts, parse_host
from skyward.storage.client import Storage


@dataclass(frozen=True, slots=True)
class SSH:
    """Existing machines: ``hosts`` as "host", "user@host" or "user@host:port" strings;
    ``user``/``port`` are the defaults for hosts that do not say. ``key_path`` picks the
    private key (default: ~/.ssh keys and the ssh-agent). ``known_hosts`` is where host
    keys are recorded (default ~/.skyward/known_hosts)."""

    name: ClassVar[str] = "ssh"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset({"ssh_timeout", "bootstrap_timeout", "ssh_retry_interval"})

    hosts: tuple[str, ...] = ()
    user: str = "root"
    port: int = 22
    key_path: str | None = None
    known_hosts: str | None = None
    addresses: tuple[SSHEndpoint, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hosts = (self.hosts,) if isinstance(self.hosts, str) else tuple(self.hosts)
        if not hosts:
            raise fail("SSH", "hosts", self.hosts, 'give at least one host, e.g. SSH(hosts=["10.0.0.5"])')
        check_number("SSH", "port", self.port, minimum=1, integer=True)
        if self.key_path is not None and not os.path.isfile(os.path.expanduser(self.key_path)):
            raise fail("SSH", "key_path", self.key_path, "no such file; give the path of a private key")
        object.__setattr__(self, "hosts", hosts)
        endpoints = tuple(parse_host(h, self.user, self.port, self.key_path) for h in hosts)
        object.__setattr__(self, "addresses", endpoints)

    def validate(self, spec: Spec, options: Options) -> None:
        """Refuse what SSH hosts cannot honour (before connecting anywhere)."""
        nodes = spec.node_count
        if nodes.ceiling > len(self.addresses):
            raise fail("Spec", "nodes", spec.nodes, f"SSH has {len(self.addresses)} hosts; ask for at most that many")
        if spec.image.python_version != local_python():
            raise fail(
                "Image", "python", spec.image.python,
                f"the client runs Python {local_python()} and cloudpickle needs the same minor version "
                'on nodes; use "auto" or run the client with that version',
            )
        for name in ("accelerator", "region", "max_hourly_cost", "instance_type"):
            if getattr(spec, name) is not None:
                raise fail("Spec", name, getattr(spec, name), "SSH hosts are what they are; remove it")
        if spec.allocation != "spot-if-available":
            raise fail("Spec", "allocation", spec.allocation, "SSH hosts are what they are; remove it")
        check_remote_spec(spec, options)

    def offers(self, spec: Spec) -> list[Offer]:
        """Your own hosts are not priced here."""
        return []

    def default_storage(self, spec: Spec) -> Storage | None:
        """None: your hosts come with no object storage; give each Volume its own."""
        return None

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Bring the first ``Nodes.floor`` hosts up as the pool; blocks until every agent
        answers. The hosts after them join (and leave) as the pool grows and shrinks. A
        floor of 0 opens with no host in use (``sleeping``: the head starts when work waits)."""
        if spec.node_count.floor == 0:
            from skyward.providers.ssh.sleeping import sleeping

            return sleeping(self.launch, spec, options, pool_id, len(self.addresses))
        hosts = SpareHosts(pool_id, self.addresses)
        handles = [hosts.create(node) for node in range(spec.node_count.floor)]
        # Ray loads when a pool launches, not in a script that adopts a kept pool
        from skyward.providers.ssh.launch import launch_on_hosts

        return launch_on_hosts(handles, spec, options, pool_id, KnownHosts(self.known_hosts), machines=hosts)


class SpareHosts:
    """The ``Machines`` of an SSH pool: its hosts in the order given, each used by at most
    one node at a time (a host that left, or was lost, may serve a later node)."""

    def __init__(self, pool_id: str, addresses: tuple[SSHEndpoint, ...]) -> None:
        self._pool_id = pool_id
        self._addresses = addresses
        self._used: dict[str, int] = {}
        self._joins = itertools.count()
        self._lock = threading.Lock()

    def capacity(self) -> int:
        return len(self._addresses)

    def create(self, node: int) -> NodeHandle:
        with self._lock:
            taken = set(self._used.values())
            free = [index for index in range(len(self._addresses)) if index not in taken]
            if not free:
                raise RuntimeError(
                    f"every one of the {len(self._addresses)} SSH hosts is in use; give sky.SSH more hosts to grow further"
                )
            index = free[0]
            endpoint = self._addresses[index]
            handle = NodeHandle(
                f"{self._pool_id}-{index}-{next(self._joins)}", endpoint.host, endpoint, instance_type="ssh-host"
            )
            self._used[handle.id] = index
        return handle

    def release(self, handle: NodeHandle) -> None:
        with self._lock:
            self._used.pop(handle.id, None)

    def explain(self, node: int, handle: NodeHandle, seen: str) -> Loss | None:
        """Nothing to add: a host of yours is not taken back by anyone."""
        return None

    def gone(self, handles: dict[int, NodeHandle]) -> list[Loss]:
        """Nothing to ask: a lost host shows as its watchdog's stream ending."""
        return []


def check_remote_nodes(spec: Spec, options: Options) -> None:
    """ValueError for a remote pool that may have no node (a floor of 0: it sleeps with
    every node released, head included) with collections on: they live on the head, so
    their contents would be lost while it sleeps."""
    nodes = spec.node_count
    if nodes.floor == 0 and options.collections_enabled:
        lazy = nodes.desired == 0
        what = f"Nodes({'desired' if lazy else 'min'}=0)"
        raise fail(
            "Options", "cluster", options.cluster,
            f"a remote pool with {what} releases every node while idle, its head included, and its "
            "collections (sky.dict() & co.) live on the head: they would be lost. Pass "
            "options=sky.Options(cluster=False) to run it without collections, or keep min and desired "
            "at 1 or more to use them",
        )


def check_remote_spec(spec: Spec, options: Options) -> None:
    """What the remote path cannot honour yet, refused naming the field."""
    check_remote_nodes(spec, options)
    if spec.image.skyward_source not in ("auto", "local"):
        raise fail(
            "Image", "skyward_source", spec.image.skyward_source,
            'nodes always run the client\'s own skyward, shipped as a wheel; use "auto"',
        )
