"""The remote path every machine-based provider shares: from SSH-reachable node handles
(hosts the user has, or machines a cloud provider just created) to a running pool.

``launch_on_hosts`` connects to every host, checks the Spec's hardware against what each
host reports, ships this client's skyward (and, when the hosts cannot reach the package
indexes ``Image.pip`` needs, wheels resolved here for their platform), bootstraps the
Image, checks versions, starts a watchdog per host (which mounts ``Spec.volumes`` there
with credentials the client resolved and holds for the pool's life), Ray, and the head
relay, and hands the pool a ``LaunchedCluster`` whose transport is the relay. Its ``stop`` stops
all of it on every host (unmounting the volumes), releases the volumes' credentials,
then calls the provider's ``release`` (terminating a cloud's machines).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from msgspec import structs

from skyward.collections.config import CollectionsConfig, host_count
from skyward.core import handshake
from skyward.core.accelerator_catalog import identify
from skyward.core.instance import AcceleratorInfo, InstanceInfo, NetworkInfo, PeerInfo
from skyward.engine.events import EventSink
from skyward.engine.transports.relay import RelayTransport
from skyward.engine.transports.upload_lane import new_credentials
from skyward.engine.wire import ByValueEncoder
from skyward.image.image import Image
from skyward.image.script import Artifacts, BootstrapOp, env_dir, index_urls, render, requirement_name
from skyward.model.cluster import Cluster
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Options, Spec
from skyward.node.agent import AgentSetup
from skyward.observe.metrics import resolve as resolve_metrics
from skyward.plugins.hooks import agent_launch, bootstrap_ops, with_plugins_image
from skyward.plugins.node import pack
from skyward.providers.base import Holdings, LaunchedCluster, PhaseTiming, TeardownError
from skyward.providers.relay_collections import RelayCollections
from skyward.providers.ssh import includes, wheels
from skyward.providers.ssh.bootstrap import Shipment
from skyward.providers.ssh.cluster import HEAD_RESOURCE, START_TIMEOUT, RemoteHosts, RemoteNode, all_of
from skyward.providers.ssh.connection import BOOTING_RETRY_INTERVAL, BOOTING_SSH_TIMEOUT, KnownHosts, SSHReach
from skyward.providers.ssh.handover import Handover, HostState
from skyward.providers.ssh.handover import release as release_handover
from skyward.providers.ssh.head_relay import RelayConfig, host_resource
from skyward.providers.ssh.loop import LoopThread
from skyward.providers.ssh.membership import Machines, RemoteMembership
from skyward.providers.ssh.versions import report
from skyward.storage import pool_volumes
from skyward.storage.mount import MOUNT_TIMEOUT_S
from skyward.storage.pool_volumes import NodeVolume

DEFAULT_SSH_TIMEOUT = 30.0
TAKE_OVER_SSH_TIMEOUT = 10.0
"""Seconds to reach each host of a pool taken over again (it answered minutes ago)."""
TAKE_OVER_WAIT = 30.0
"""Seconds for each watchdog of a pool taken over to take its new client."""
DEFAULT_READY_TIMEOUT = 120.0
STOP_TIMEOUT = 90.0
HOST_SHARE = 0.01
"""How much of the head's ``skyward-head`` resource one collection host takes."""
COMPRESS = True
"""Whether the stream between the client and the head relay (an SSH channel) sends large
messages compressed where that pays, both ways (lz4: ``codec.relay_frame``; measured in
docs/benchmarks.md, payload compression). benchmarks/bench_compression.py turns it off to
compare."""
ARCHITECTURES = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "x86_64", "amd64": "x86_64"}


def _relay_config(path: HostPath, options: Options, ready_timeout: float) -> RelayConfig:
    """The head relay's config once the head's Ray answers: its address and every
    node's agent setup (plugins' launchers run here). The other hosts may still be
    joining: their ``ray start`` has ``START_TIMEOUT`` before the agents' wait begins."""
    cluster = path.cluster
    head = cluster.nodes[0]
    return RelayConfig(
        f"{head.private_ip}:{cluster.gcs_port}", head.private_ip, tuple(path.setup(node) for node in cluster.nodes),
        ready_timeout, handshake.new_secret(), COMPRESS, kept=options.keep_alive is not None,
        resume_within=cluster.resume_within, joining=START_TIMEOUT, upload=new_credentials(),
    )


def launch_on_hosts(
    handles: Sequence[NodeHandle],
    spec: Spec,
    options: Options,
    pool_id: str,
    known_hosts: KnownHosts,
    release: Callable[[], None] = lambda: None,
    *,
    machines: Machines | None = None,
    halt_on_expiry: bool = False,
    default_ssh_timeout: float = DEFAULT_SSH_TIMEOUT,
    default_retry_interval: float | None = None,
    holdings: Holdings | None = None,
) -> LaunchedCluster:
    """Bring ``handles`` up as the pool's nodes (node 0 is the head); blocks until every
    agent answers. On failure everything started is stopped and ``release`` called.
    ``machines`` gives more hosts while the pool runs (then the cluster has a
    ``RemoteMembership``). ``halt_on_expiry``: a node whose client vanished shuts its
    machine down after the cleanup (machines created for the pool). The defaults apply
    where Options leave ``ssh_timeout``/``ssh_retry_interval`` unset (a machine that is
    still booting). A kept pool (``Options.keep_alive``) outlives its client's leaving on
    the hosts, and its cluster carries the ``Handover`` another process takes it over
    from: ``holdings`` is what ``release`` removes, for that process to remove (None:
    what the pool's cloud tags find), with the pool's files (``registry.files_of``)."""
    phases: list[PhaseTiming] = []
    loop = LoopThread(f"skyward-ssh-{pool_id[:8]}")
    cluster = RemoteHosts(pool_id, spec.ttl, lambda name, s, node: phases.append(PhaseTiming(name, s, node)))
    ready_timeout = float(options.provision_timeout or DEFAULT_READY_TIMEOUT)
    credentials = ExitStack()
    try:
        volumes = credentials.enter_context(pool_volumes.resolved(spec.volumes))
        retry = float(options.ssh_retry_interval) if options.ssh_retry_interval else default_retry_interval
        reach = SSHReach(known_hosts, float(options.ssh_timeout or default_ssh_timeout), retry)
        path = HostPath(spec, options, cluster, loop, reach, volumes, halt_on_expiry)
        encoder = path.encoder
        path.up(handles, range(len(handles)))
        relay = loop.run(cluster.boot_relay(), START_TIMEOUT)  # its imports run while Ray starts

        async def configure_relay() -> RelayConfig:  # once the head is up: the relay starts while the others join
            config = await asyncio.to_thread(_relay_config, path, options, ready_timeout)  # plugins' code: off the loop
            cluster.configure_relay(relay, pickle.dumps(config))
            return config

        env = {"PYTHONPATH": includes_path(cluster.nodes[0])}
        config = loop.run(cluster.start_ray(resources, env, configure_relay), 180)
        waited = START_TIMEOUT + ready_timeout + 30  # the relay's wait for the agents ends sooner, saying why
        relay_port, upload_port, agents = loop.run(cluster.relay_started(relay, waited), waited + 10)
        phases.append(PhaseTiming("agents", agents))
    except BaseException:
        stop_hosts(loop, cluster, credentials, release)
        raise

    if config.resume_within:
        cluster.resumes = reach
    lane = cluster.upload_lane(upload_port, config.upload, config.secret)
    transport = RelayTransport(cluster.relay(relay_port, config.secret, config.compress, lane), loop.loop)
    collections = RelayCollections(transport, encoder, options.collections_enabled)
    infos = tuple(setup.info for setup in config.setups)
    membership = None
    if machines is not None:
        membership = RemoteMembership(path, transport, machines, dict(enumerate(handles)), ready_timeout)

    def stop() -> None:
        if membership is not None:
            membership.close()
        stop_hosts(loop, cluster, credentials, release)

    def handover(members: tuple[NodeHandle, ...]) -> bytes:
        return pickle.dumps(handover_of(path, members, known_hosts, relay_port, config, holdings))

    return LaunchedCluster(
        tuple(handles), infos, transport, encoder, collections, stop, tuple(phases), membership,
        handover if config.kept else None,
    )


def launch_on_created(
    handles: Sequence[NodeHandle], spec: Spec, options: Options, pool_id: str, known_hosts: KnownHosts,
    held: ExitStack, machines: Machines, holdings: Holdings | None = None,
) -> LaunchedCluster:
    """``launch_on_hosts`` for machines a cloud created for the pool: each may still be
    booting (``BOOTING_SSH_TIMEOUT``) and halts once its client has vanished, and closing
    ``held`` (what the pool holds at its cloud) is the pool's release."""
    return launch_on_hosts(
        handles, spec, options, pool_id, known_hosts, held.close, machines=machines, halt_on_expiry=True,
        default_ssh_timeout=BOOTING_SSH_TIMEOUT, default_retry_interval=BOOTING_RETRY_INTERVAL,
        holdings=holdings,
    )


def handover_of(
    path: HostPath, members: Sequence[NodeHandle], known_hosts: KnownHosts, relay_port: int, config: RelayConfig,
    holdings: Holdings | None,
) -> Handover:
    """What another process needs to take the pool of the nodes ``members`` over
    (``take_over``): their hosts as they are now (a host still joining is none of them)."""
    cluster, spec = path.cluster, path.spec
    ids = {handle.id for handle in members}
    nodes = sorted((node for node in cluster.nodes if node.handle.id in ids), key=lambda node: node.index)
    hosts = []
    for node in nodes:
        assert node.facts is not None and node.ready is not None  # a member has joined: both are known
        hosts.append(HostState(node.index, node.serial, node.handle, node.pool_dir, node.facts, node.ready))
    infos = tuple(path.info(node) for node in nodes)
    return Handover(
        cluster.pool_id, spec.provider.name, spec.region or getattr(spec.provider, "region", None), tuple(hosts),
        infos, known_hosts.path, cluster.ttl, cluster.token, cluster.gcs_port, cluster.halt, cluster.volume_count,
        relay_port, config.secret, config.compress, holdings,
    )


def take_over(
    handover: Handover, spec: Spec, options: Options, loop: asyncio.AbstractEventLoop, events: EventSink,
) -> LaunchedCluster:
    """The remote pool ``handover`` describes, held by this process from now on
    (``ssh.handover``), its transport open (opened on ``loop``, its events to
    ``events``). Raises why it cannot be taken over; what is left of it is then
    abandoned in a thread of its own (``abandon``), which the process waits for at exit."""
    ssh = LoopThread(f"skyward-ssh-{handover.pool_id[:8]}")
    cluster = RemoteHosts(handover.pool_id, handover.ttl, lambda *_: None)
    cluster.token, cluster.gcs_port = handover.ray_token, handover.gcs_port
    cluster.halt, cluster.volume_count = handover.halt, handover.volume_count
    hosts = {host.serial: host for host in handover.hosts}
    port = handover.relay_port
    try:
        try:
            ssh.run(
                cluster.connect(
                    [host.handle for host in handover.hosts],
                    SSHReach(KnownHosts(handover.known_hosts), TAKE_OVER_SSH_TIMEOUT, 1.0),
                    [host.index for host in handover.hosts], [host.serial for host in handover.hosts],
                ),
                TAKE_OVER_SSH_TIMEOUT * 2 + 10,
            )
        finally:
            for node in cluster.nodes:
                node.facts, node.ready = hosts[node.serial].facts, hosts[node.serial].ready
        ssh.run(cluster.rejoin_watchdogs(TAKE_OVER_WAIT), TAKE_OVER_WAIT + 10)
        # its relay keeps a broken session as long as this computes (RelayConfig.resume_within)
        cluster.resumes = SSHReach(KnownHosts(handover.known_hosts), TAKE_OVER_SSH_TIMEOUT, 1.0)
        transport = RelayTransport(cluster.relay(port, handover.relay_secret, handover.compress), ssh.loop)
        transport.open(loop, events)
    except BaseException:
        threading.Thread(target=abandon, args=(ssh, cluster, handover), name="skyward-abandon", daemon=False).start()
        raise
    encoder = encoder_for(spec)
    collections = RelayCollections(transport, encoder, options.collections_enabled)
    written = pickle.dumps(handover)
    if handover.holdings is not None:
        handover.holdings.keep()
    return LaunchedCluster(
        tuple(host.handle for host in handover.hosts), handover.infos, transport, encoder, collections,
        lambda: stop_hosts(ssh, cluster, ExitStack(), lambda: release_handover(handover)),
        handover=lambda _: written,  # its size is fixed
    )


def abandon(ssh: LoopThread, cluster: RemoteHosts, handover: Handover) -> None:
    """Close a pool that could not be taken over. Machines created for it (``halt``) are
    removed from their cloud first and their watchdogs left counting ``Spec.ttl`` down
    (they halt what the removal missed); on other hosts the pool is stopped through the
    watchdogs reached. What fails is printed (the pool daemon's log)."""
    try:
        if handover.halt:
            try:
                release_handover(handover)
            finally:
                ssh.run(cluster.disconnect(), STOP_TIMEOUT)
                ssh.stop()
        else:
            with contextlib.suppress(Exception):
                unwatched = [node for node in cluster.nodes if node.watchdog is None]
                ssh.run(cluster.rejoin_watchdogs(TAKE_OVER_WAIT, unwatched), TAKE_OVER_WAIT + 10)
            stop_hosts(ssh, cluster, ExitStack(), lambda: release_handover(handover))
    except Exception as exc:  # noqa: BLE001 - printed: nobody waits for this thread
        print(f"skyward: the pool {handover.pool_id[:12]} could not be closed: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


def encoder_for(spec: Spec) -> ByValueEncoder:
    """How the client encodes the requests of a pool of ``spec``: the modules under
    ``Image.includes`` travel by value."""
    return ByValueEncoder(tuple(os.path.abspath(os.path.expanduser(p)) for p in spec.image.includes))


class HostPath:
    """The steps every host of a remote pool goes through, for those it opens with and
    those that join later: connect, read its facts and check the Spec's hardware
    against them, ship and bootstrap (the same command then runs its watchdog), check
    versions, wait until the watchdog watches (it mounts ``Spec.volumes`` first); and the
    ``AgentSetup`` of its agent."""

    def __init__(
        self, spec: Spec, options: Options, cluster: RemoteHosts, loop: LoopThread, reach: SSHReach,
        volumes: Sequence[NodeVolume], halt: bool,
    ) -> None:
        self.spec = spec
        self.options = options
        self.cluster = cluster
        self.loop = loop
        self.encoder = encoder_for(spec)
        self._reach = reach
        self._volumes = volumes
        self._halt = halt
        self._plugin_ops: tuple[BootstrapOp, ...] | None = None
        """The plugins' bootstrap steps, fixed by the hosts the pool opens with."""
        self._bootstrap_timeout = float(options.bootstrap_timeout or spec.image.bootstrap_timeout)
        self._collections = CollectionsConfig(
            cluster.pool_id, host_count(spec.node_count.ceiling), options.collections_enabled,
            ((HEAD_RESOURCE, HOST_SHARE),),
        )

    def up(self, handles: Sequence[NodeHandle], ranks: Sequence[int]) -> list[RemoteNode]:
        """Bring ``handles`` (at ``ranks``) as far as a running watchdog; the new nodes.
        Whatever fails is raised (the caller stops what was started)."""
        spec, cluster, loop = self.spec, self.cluster, self.loop
        timeout = self._reach.timeout
        nodes = loop.run(cluster.connect(handles, self._reach, list(ranks)), timeout * 2 + 10)
        loop.run(cluster.gather_facts(index_urls(spec.image), timeout, nodes), timeout * 3 + 60)
        check_hardware(spec, nodes)
        if self._plugin_ops is None:  # the plugins see the opening hosts and may change the Image
            view = Cluster(
                tuple(handles), tuple(self.info(node) for node in nodes), spec.provider.name, spec,
                self.options.resolved_worker,
            )
            spec = self.spec = with_plugins_image(spec, view)
            self._plugin_ops = tuple(bootstrap_ops(spec.plugins, structs.replace(view, spec=spec)))
        ops = self._plugin_ops
        shipments = _shipments(spec.image, nodes, cluster.on_phase)
        points = tuple(item.volume.mount for item in self._volumes)

        def script_for(node: RemoteNode) -> tuple[str, str]:
            artifacts = shipments[node.index].artifacts
            script = render(
                spec.image, artifacts, node.pool_dir, self._bootstrap_timeout, mount_points=points, plugin_ops=ops
            )
            return script, f"{env_dir(spec.image, artifacts)}/venv/bin/python"

        versions = {**report(), "skyward_digest": shipments[nodes[0].index].skyward_digest}

        async def ready(node: RemoteNode) -> None:  # a host watches while slower hosts bootstrap
            await cluster.bootstrap(script_for, shipments, self._bootstrap_timeout, self._halt, self._volumes, [node])
            cluster.check_versions(versions, [node])
            await cluster.watching([node])

        waited = self._bootstrap_timeout * 2 + 120 + 60 + len(self._volumes) * MOUNT_TIMEOUT_S
        loop.run(all_of(ready(node) for node in nodes), waited)
        return nodes

    def setup(self, node: RemoteNode) -> AgentSetup:
        """What ``node``'s agent starts with (a node that joins later gets the pool's
        real membership with its first task)."""
        assert node.ready is not None
        info = self.info(node)
        plugins = self.spec.plugins
        python = f"{node.ready.env_dir}/venv/bin/python"
        return AgentSetup(
            info=info, worker=self.options.resolved_worker, cwd=f"{node.pool_dir}/work",
            sys_path=(includes_path(node),), env={**self.spec.image.env, **node.ready.shell_vars},
            metrics=resolve_metrics(self.spec.image.metrics), collections=self._collections,
            notes=f"{node.pool_dir}/notes", plugins=pack(plugins, self.encoder.dumps),
            launch=agent_launch(plugins, python, info) if any(p.launcher for p in plugins) else None,
        )

    def info(self, node: RemoteNode) -> InstanceInfo:
        """``node``'s place among the pool's current hosts, from their facts (``head_port``
        0 before Ray runs)."""
        members = self.cluster.nodes
        head = members[0]
        devices = [_accelerator(member) for member in members]
        device = _accelerator(node)
        return InstanceInfo(
            node=node.index, worker=0, total_nodes=len(members), workers_per_node=1,
            accelerators=device.count if device is not None else 0.0,
            total_accelerators=sum(found.count for found in devices if found is not None),
            head_addr=head.private_ip, head_port=self.cluster.gcs_port, job_id=self.cluster.pool_id,
            peers=[PeerInfo(member.index, member.private_ip, member.address.host) for member in members],
            accelerator=device, network=NetworkInfo("eth0", None),
        )


def includes_path(node: RemoteNode) -> str:
    """Where ``node`` unpacked ``Image.includes``."""
    assert node.ready is not None
    return f"{node.ready.env_dir}/includes"


def resources(node: RemoteNode) -> dict[str, float]:
    """The Ray resource that pins ``node``'s agent there (by serial: unique per host)."""
    return {host_resource(node.serial): 1.0}


def check_hardware(spec: Spec, nodes: Sequence[RemoteNode]) -> None:
    """ValueError naming the host, the field, what was wanted and what it has, for the
    first host smaller than the Spec asks."""
    for node in nodes:
        facts = node.facts
        assert facts is not None
        machine = ARCHITECTURES.get(facts.platform.machine, facts.platform.machine)
        found = [
            ("vcpus", spec.vcpus, facts.vcpus, "CPUs"),
            ("memory_gb", spec.memory_gb, round(facts.memory_gb, 1), "GB of memory"),
            ("disk_gb", spec.disk_gb, round(facts.disk_gb, 1), "GB free in its home directory"),
        ]
        for field, wanted, has, unit in found:
            if wanted is not None and has < wanted:
                raise ValueError(
                    f"Spec.{field}={wanted!r} is not met by node {node.index} ({node.address}): it has {has} "
                    f"{unit}; lower Spec.{field} or use bigger hosts"
                )
        if spec.architecture is not None and machine != spec.architecture:
            raise ValueError(
                f"Spec.architecture={spec.architecture!r} is not met by node {node.index} ({node.address}): it is "
                f"{machine}; remove it or use {spec.architecture} hosts"
            )


def stop_hosts(loop: LoopThread, cluster: RemoteHosts, credentials: ExitStack, release: Callable[[], None]) -> None:
    """Stop the pool on every host, then release the volumes' credentials and the machines."""
    try:
        try:
            loop.run(cluster.stop(), STOP_TIMEOUT + cluster.volume_count * MOUNT_TIMEOUT_S)
        except Exception as exc:
            raise TeardownError(f"could not confirm that the pool's processes stopped on every host: {exc}") from exc
        finally:
            loop.stop()
    finally:
        try:
            credentials.close()
        finally:
            release()


def _shipments(
    image: Image, nodes: Sequence[RemoteNode], on_phase: Callable[[str, float, int | None], None]
) -> dict[int, Shipment]:
    """What each node gets: this skyward's wheel, its dependencies for the node's
    platform, the includes archive, and Image.pip's wheels when a node cannot reach an
    index it needs (then every node of that platform installs them without an index)."""
    started = time.monotonic()
    wheel = wheels.skyward_wheel()
    requirements = wheels.dependency_requirements(wheel)
    archive = includes.archive(image)
    pip_shipped = image.pip and any(node.facts is not None and node.facts.unreachable for node in nodes)
    by_platform: dict[str, Shipment] = {}
    shipments = {}
    for node in nodes:
        assert node.facts is not None
        target = wheels.NodePlatform(
            node.facts.platform.system, node.facts.platform.machine, image.python_version, node.facts.platform.glibc
        )
        if target.tag not in by_platform:
            deps = wheels.resolve(requirements, target)
            files = [*sorted(deps.glob("*.whl")), wheel]
            key = deps.name
            if pip_shipped:
                resolved = time.monotonic()
                for pip_wheels in _pip_wheels(image, target):
                    files += sorted(pip_wheels.glob("*.whl"))
                    key += f"+{pip_wheels.name}"
                on_phase("pip-resolved-on-client", time.monotonic() - resolved, None)
            artifacts = Artifacts(
                skyward_wheel=wheel.name,
                wheels_key=key,
                includes_archive=f"includes-{archive[1]}.tar.gz" if archive else None,
                includes_digest=archive[1] if archive else "",
                pip_shipped=bool(pip_shipped),
            )
            by_platform[target.tag] = Shipment(tuple(files), archive, artifacts, wheels.wheel_digest(wheel))
        shipments[node.index] = by_platform[target.tag]
    on_phase("wheels", time.monotonic() - started, None)
    return shipments


def _pip_wheels(image: Image, target: wheels.NodePlatform) -> list[Path]:
    """Wheelhouses for Image.pip on ``target``: each PipIndex's own packages from it, the
    rest from the default index and the indexes that name no packages."""
    found = []
    scoped: set[str] = set()
    for index in image.pip_indexes:
        names = {requirement_name(p) for p in index.packages}
        wanted = [p for p in image.pip if requirement_name(p) in names]
        scoped.update(requirement_name(p) for p in wanted)
        if wanted:
            found.append(wheels.resolve(wanted, target, index.url))
    rest = [p for p in image.pip if requirement_name(p) not in scoped]
    if rest:
        extra = tuple(index.url for index in image.pip_indexes if not index.packages)
        found.append(wheels.resolve(rest, target, None, extra))
    return found


def _accelerator(node: RemoteNode) -> AcceleratorInfo | None:
    """The node's GPUs as its ``nvidia-smi`` reported them (None: none found)."""
    gpus = node.facts.gpus if node.facts is not None else ()
    if not gpus:
        return None
    name, memory = gpus[0]
    seen = identify(name)
    return AcceleratorInfo(seen.model.name if seen is not None else name, float(len(gpus)), round(memory, 1))
