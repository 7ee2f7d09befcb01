"""``sky.SSH(hosts=[...])``: machines you already have, reached over SSH.

The first host is node 0, the head. Opening the pool connects to every host (host keys
checked against skyward's own known_hosts, trust on first use), bootstraps the Image
(see ``skyward.bootstrap``), checks that nodes and client agree on versions, starts Ray
(head first) bound to the hosts' own addresses with token auth, starts a keeper per
node (``Spec.ttl``) and the head agent, and connects to it through an SSH port forward.
Closing stops all of it on every host and removes the pool's files (the install cache
under ~/.cache/skyward stays for the next pool).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from skyward.bootstrap import includes, wheels
from skyward.bootstrap.loop import LoopThread
from skyward.bootstrap.runner import Shipment
from skyward.bootstrap.script import Artifacts, render
from skyward.bootstrap.ssh import HostAddress, KnownHosts, parse_host
from skyward.bootstrap.versions import report
from skyward.cluster.agent import AgentSetup
from skyward.cluster.head_agent import HeadConfig
from skyward.cluster.remote_cluster import RemoteCluster, RemoteNode
from skyward.cluster.remote_collections import RemoteEngine
from skyward.cluster.remote_driver import RemoteDriver
from skyward.collections.config import CollectionsConfig, host_count
from skyward.observe.metrics import resolve as resolve_metrics
from skyward.providers.base import LaunchedCluster
from skyward.runtime import InstanceInfo, NetworkInfo, PeerInfo
from skyward.spec import Options, Spec, local_python
from skyward.validation import check_number, fail

DEFAULT_SSH_TIMEOUT = 30.0
DEFAULT_READY_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class SSH:
    """Existing machines: ``hosts`` as "host", "user@host" or "user@host:port" strings;
    ``user``/``port`` are the defaults for hosts that do not say. ``key_path`` picks the
    private key (default: ~/.ssh keys and the ssh-agent). ``known_hosts`` is where host
    keys are recorded (default ~/.skyward/known_hosts)."""

    name: ClassVar[str] = "ssh"

    hosts: tuple[str, ...] = ()
    user: str = "root"
    port: int = 22
    key_path: str | None = None
    known_hosts: str | None = None
    addresses: tuple[HostAddress, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hosts = (self.hosts,) if isinstance(self.hosts, str) else tuple(self.hosts)
        if not hosts:
            raise fail("SSH", "hosts", self.hosts, 'give at least one host, e.g. SSH(hosts=["10.0.0.5"])')
        check_number("SSH", "port", self.port, minimum=1, integer=True)
        if self.key_path is not None and not os.path.isfile(os.path.expanduser(self.key_path)):
            raise fail("SSH", "key_path", self.key_path, "no such file; give the path of a private key")
        object.__setattr__(self, "hosts", hosts)
        object.__setattr__(self, "addresses", tuple(parse_host(h, self.user, self.port) for h in hosts))

    def validate(self, spec: Spec, options: Options) -> None:
        """Refuse what SSH hosts cannot honour (before connecting anywhere)."""
        nodes = spec.node_count
        if nodes.desired > len(self.addresses) or nodes.elastic:
            raise fail(
                "Spec", "nodes", spec.nodes,
                f"SSH has {len(self.addresses)} hosts; ask for at most that many, with a fixed count",
            )
        if spec.image.python_version != local_python():
            raise fail(
                "Image", "python", spec.image.python,
                f"the client runs Python {local_python()} and cloudpickle needs the same minor version "
                'on nodes; use "auto" or run the client with that version',
            )
        for name in ("accelerator", "region", "max_hourly_cost"):
            if getattr(spec, name) is not None:
                raise fail("Spec", name, getattr(spec, name), "SSH hosts are what they are; remove it")
        if spec.image.skyward_source == "github":
            raise NotImplementedError('Image(skyward_source="github") is not implemented; use "auto" or "pypi"')
        if spec.volumes or spec.plugins:
            raise NotImplementedError("Spec.volumes and Spec.plugins are not implemented for SSH yet; remove them")

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Bring the hosts up as a cluster; blocks until the head agent answers."""
        phases: list[tuple[str, float, int | None]] = []
        loop = LoopThread(f"skyward-ssh-{pool_id[:8]}")
        cluster = RemoteCluster(pool_id, spec.ttl, lambda name, s, node: phases.append((name, s, node)))
        addresses = list(self.addresses[: spec.node_count.desired])
        ssh_timeout = float(options.ssh_timeout or DEFAULT_SSH_TIMEOUT)
        bootstrap_timeout = float(options.bootstrap_timeout or spec.image.bootstrap_timeout)
        try:
            loop.run(cluster.connect(addresses, self.key_path, KnownHosts(self.known_hosts), ssh_timeout), ssh_timeout * 2 + 10)
            started = time.monotonic()
            shipment = _shipment(spec)
            phases.append(("wheels", time.monotonic() - started, None))
            script_for = lambda node: render(spec.image, shipment.artifacts, node.pool_dir)  # noqa: E731
            loop.run(cluster.bootstrap(script_for, shipment, bootstrap_timeout), bootstrap_timeout + 60)
            cluster.check_versions(_client_versions(shipment), check_digest=shipment.artifacts.skyward_wheel is not None)
            loop.run(cluster.start_keepers(), 60)
            includes_path = lambda node: f"{node.ready.env_dir}/includes"  # noqa: E731
            env = {"PYTHONPATH": includes_path(cluster.nodes[0])}
            loop.run(cluster.start_ray(_resources, env), 180)
            config = _head_config(spec, options, pool_id, cluster, includes_path)
            ready_timeout = float(options.provision_timeout or DEFAULT_READY_TIMEOUT)
            port, agents = loop.run(cluster.start_head_agent(config), ready_timeout + 30)
            phases.append(("agents", agents, None))
        except BaseException:
            _stop(loop, cluster)
            raise
        drivers: list[RemoteDriver] = []

        def connect(worker: Any, timeout: float, emit: Any, wants: Any, pool_loop: Any) -> RemoteDriver:
            roots = tuple(os.path.abspath(os.path.expanduser(p)) for p in spec.image.includes)
            driver = RemoteDriver(len(cluster.nodes), port, emit, wants, pool_loop, roots)
            drivers.append(driver)
            driver.connect()
            return driver

        def teardown() -> None:
            for driver in drivers:
                driver.close()
            _stop(loop, cluster)

        def collections_engine() -> RemoteEngine:
            if not drivers:
                raise RuntimeError("the pool has no connection to its head agent yet")
            return RemoteEngine(drivers[-1].collection_call)

        infos = [setup.info for setup in config.setups]
        extras = {"phases": tuple(phases), "connect": connect, "collections_engine": collections_engine}
        return LaunchedCluster([], infos, teardown, extras=extras)


def _stop(loop: LoopThread, cluster: RemoteCluster) -> None:
    try:
        loop.run(cluster.stop(), 90)
    finally:
        loop.stop()


def _resources(node: RemoteNode) -> dict[str, float]:
    return {f"skyward-node-{node.index}": 1.0}


def _shipment(spec: Spec) -> Shipment:
    """The wheels (this skyward's own, or only uv when installing the released one) and
    the includes archive."""
    image = spec.image
    wheel = None
    if image.skyward_source in ("auto", "local") and wheels.source_checkout() is not None:
        wheel = wheels.skyward_wheel()
        requirements = wheels.dependency_requirements(wheel)
    else:
        requirements = [wheels.pinned("uv")]
    deps = wheels.dependency_wheels(requirements)
    files = sorted(deps.glob("*.whl")) + ([wheel] if wheel is not None else [])
    archive = includes.archive(image)
    artifacts = Artifacts(
        skyward_wheel=wheel.name if wheel else None,
        wheels_key=f"{deps.name}-{wheel.parent.name if wheel else 'pypi'}",
        includes_archive=f"includes-{archive[1]}.tar.gz" if archive else None,
        includes_digest=archive[1] if archive else "",
    )
    return Shipment(files, archive, artifacts, wheels.wheel_digest(wheel) if wheel else "")


def _client_versions(shipment: Shipment) -> dict[str, str]:
    """This client's versions; the skyward digest is that of the wheel shipped (files
    edited since then are not what this process runs either)."""
    versions = report()
    if shipment.skyward_digest:
        versions["skyward_digest"] = shipment.skyward_digest
    return versions


def _head_config(spec: Spec, options: Options, pool_id: str, cluster: RemoteCluster, includes_path: Any) -> HeadConfig:
    count = len(cluster.nodes)
    head = cluster.nodes[0]
    peers = [PeerInfo(node.index, node.private_ip, node.address.host) for node in cluster.nodes]
    worker = options.resolved_worker
    metrics = resolve_metrics(spec.image.metrics)
    collections = CollectionsConfig(pool_id, host_count(count), options.collections_enabled)
    setups = []
    for node in cluster.nodes:
        assert node.ready is not None
        info = InstanceInfo(
            node=node.index, worker=0, total_nodes=count, workers_per_node=1, accelerators=0.0,
            total_accelerators=0.0, head_addr=head.private_ip, head_port=cluster.gcs_port, job_id=pool_id,
            peers=peers, accelerator=None, network=NetworkInfo("eth0", None),
        )
        work_dir = f"{node.pool_dir}/work"
        env = {**spec.image.env, **node.ready.shell_vars}
        setups.append(
            AgentSetup(
                info=info, worker=worker, cwd=work_dir, sys_path=(includes_path(node),),
                env=env, metrics=metrics, collections=collections,
            )
        )
    return HeadConfig(
        gcs_address=f"{head.private_ip}:{cluster.gcs_port}", node_ip=head.private_ip,
        setups=setups, worker=worker, default_timeout=options.default_compute_timeout,
        ready_timeout=float(options.provision_timeout or DEFAULT_READY_TIMEOUT),
    )


