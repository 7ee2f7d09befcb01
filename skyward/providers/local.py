"""``sky.Local()``: N nodes as N agent processes on this machine, on a private Ray instance.

Local nodes share this machine's working directory and sys.path, so functions and
classes from your own modules work as they are. They run in this Python environment, or,
when the Image asks for packages, in a virtual environment built from it here
(``local_env``); the pool's plugins apply as on remote pools. Spec fields that describe
a machine you cannot get here (an accelerator, a region, spot capacity, more CPUs or
memory than this machine has) are refused with a ValueError rather than ignored.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import psutil
import ray

from skyward.api.instance import InstanceInfo, NetworkInfo, PeerInfo
from skyward.api.spec import DEFAULT_TTL, Image, Options, Spec, local_python
from skyward.api.validation import fail
from skyward.collections.config import CollectionsConfig, host_count
from skyward.collections.installed import DriverCollections
from skyward.engine.transports.lane import lane_path
from skyward.engine.transports.ray_actors import RayTransport
from skyward.engine.wire import encode
from skyward.node import death
from skyward.node.agent import AgentSetup, start_agents, stop_agents, wait_ready
from skyward.observe.metrics import resolve as resolve_metrics
from skyward.plugins.cluster import Cluster as PluginCluster
from skyward.plugins.hooks import agent_launch, bootstrap_ops, with_plugins_image
from skyward.plugins.node import pack
from skyward.providers import local_env
from skyward.providers.agent_membership import AgentMembership, Placement
from skyward.providers.base import Cluster, NodeHandle, Offer, PhaseTiming
from skyward.providers.local_env import client_site_dirs
from skyward.providers.local_ray import LocalRay
from skyward.storage.client import Storage
from skyward.storage.pool_volumes import mounted

DEFAULT_READY_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Local:
    """Run the pool's nodes as processes on this machine (the default provider)."""

    name: ClassVar[str] = "local"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()

    def validate(self, spec: Spec, options: Options) -> None:
        """Raise ValueError/NotImplementedError for what a local pool cannot honour."""
        _check_machine(spec)
        _check_image(spec.image)
        if spec.instance_type is not None:
            raise fail("Spec", "instance_type", spec.instance_type, "a local pool runs on this machine; remove it")

    def offers(self, spec: Spec) -> list[Offer]:
        """This machine, at no price."""
        memory_gb = psutil.virtual_memory().total / 1024**3
        return [Offer(self.name, "local", float(os.cpu_count() or 1), memory_gb, 0.0, False, architecture=_machine())]

    def default_storage(self, spec: Spec) -> Storage | None:
        """None: this machine has no object storage of its own."""
        return None

    def launch(self, spec: Spec, options: Options, pool_id: str) -> Cluster:
        """Mount ``spec.volumes`` on this machine (the nodes share it), start (or share)
        the local Ray instance and one agent per node; blocks until every agent answers
        or ``Options.provision_timeout`` passes. Everything is undone if a step fails."""
        started = time.monotonic()
        with ExitStack() as volumes:
            volumes.enter_context(mounted(spec.volumes))
            mounting = time.monotonic() - started
            cluster = self._start(spec, options, pool_id)
            held = volumes.pop_all()
        stop = cluster.stop

        def stop_then_unmount() -> None:
            with held:
                stop()

        phases = ((PhaseTiming("volumes", mounting),) if spec.volumes else ()) + cluster.phases
        return replace(cluster, stop=stop_then_unmount, phases=phases)

    def _start(self, spec: Spec, options: Options, pool_id: str) -> Cluster:
        started = time.monotonic()
        LocalRay.acquire()
        engine = time.monotonic() - started
        agents: list[Any] = []
        try:
            count = spec.node_count.floor
            port = _gcs_port()
            worker = options.resolved_worker
            first = [_info(node, pool_id, port, count) for node in range(count)]
            view = PluginCluster(tuple(_handle(pool_id, n) for n in range(count)), tuple(first), self.name, spec, worker)
            spec = with_plugins_image(spec, view)
            _check_image(spec.image)
            built = local_env.prepare(
                spec.image, bootstrap_ops(spec.plugins, replace(view, spec=spec)), spec.image.bootstrap_timeout
            )
            env = {**built.env}
            sys_path = _sys_path(spec.image, isolated=built.python is not None)
            metrics = resolve_metrics(spec.image.metrics)
            collections = CollectionsConfig(pool_id, host_count(spec.node_count.ceiling), options.collections_enabled)
            notes = _notes_dir(pool_id)
            plugins = pack(spec.plugins)

            def place(node: int) -> Placement:
                info = _info(node, pool_id, port, max(count, node + 1))
                lane = lane_path(LocalRay.temp_dir(), pool_id, node)
                setup = AgentSetup(
                    info, worker, os.getcwd(), sys_path, env, metrics, collections, lane, notes, plugins,
                    agent_launch(spec.plugins, built.python, info),
                )
                return Placement(setup, _handle(pool_id, node), lane=lane)

            placements = [place(node) for node in range(count)]
            agents = start_agents([placement.setup for placement in placements])
            timeout = options.provision_timeout or DEFAULT_READY_TIMEOUT
            wait_ready(agents, timeout, "on this machine", "raise Options.provision_timeout or use fewer nodes")
        except BaseException:
            stop_agents(agents)
            LocalRay.release()
            raise

        building = sum(seconds for _, seconds in built.phases)
        phases = (
            PhaseTiming("engine", engine),
            *(PhaseTiming(name, seconds) for name, seconds in built.phases),
            PhaseTiming("agents", time.monotonic() - started - engine - building),
        )
        transport = RayTransport(
            agents, [placement.lane for placement in placements], lane_threads=spec.node_count.ceiling * worker.slots,
            postmortem=lambda node: death.cause_of_death(notes, node) if notes else None,
        )
        membership = AgentMembership(transport, dict(enumerate(agents)), place, timeout, "on this machine")

        def stop() -> None:
            try:
                stop_agents(membership.close())
            finally:
                LocalRay.release()

        nodes = tuple(placement.handle for placement in placements)
        infos = tuple(placement.setup.info for placement in placements)
        return Cluster(
            nodes, infos, transport, encode, DriverCollections(collections), stop, phases, membership=membership
        )


def _handle(pool_id: str, node: int) -> NodeHandle:
    return NodeHandle(f"{pool_id}-{node}", "127.0.0.1", instance_type="local")


def _notes_dir(pool_id: str) -> str:
    """Where the pool's agents leave their post-mortem notes: in the private Ray
    instance's temp dir (removed with it), or "" when Ray is not ours."""
    temp = LocalRay.temp_dir()
    return os.path.join(temp, f"notes-{pool_id[:12]}") if temp else ""


def _check_machine(spec: Spec) -> None:
    if spec.accelerator is not None:
        raise fail(
            "Spec", "accelerator", spec.accelerator,
            "sky.Local() runs on this machine's CPU; drop the accelerator or use a provider with GPUs",
        )
    cpus = os.cpu_count() or 1
    if spec.vcpus is not None and spec.vcpus > cpus:
        raise fail("Spec", "vcpus", spec.vcpus, f"this machine has {cpus} CPUs")
    memory_gb = psutil.virtual_memory().total / 1024**3
    if spec.memory_gb is not None and spec.memory_gb > memory_gb:
        raise fail("Spec", "memory_gb", spec.memory_gb, f"this machine has {memory_gb:.1f} GB")
    disk_gb = psutil.disk_usage(os.getcwd()).free / 1024**3
    if spec.disk_gb is not None and spec.disk_gb > disk_gb:
        raise fail("Spec", "disk_gb", spec.disk_gb, f"this machine has {disk_gb:.0f} GB free")
    machine = _machine()
    if spec.architecture is not None and spec.architecture != machine:
        raise fail("Spec", "architecture", spec.architecture, f"this machine is {machine}")
    if spec.allocation == "spot":
        raise fail("Spec", "allocation", "spot", "sky.Local() has no spot capacity; use the default")
    if spec.region is not None:
        raise fail("Spec", "region", spec.region, "sky.Local() has no regions; remove it")
    if spec.ttl != DEFAULT_TTL:
        raise fail(
            "Spec", "ttl", spec.ttl,
            "local nodes stop with the client (Spec.ttl is how long remote nodes outlive a vanished client); remove it",
        )


def _check_image(image: Image) -> None:
    if image.python != "auto" and image.python != local_python():
        raise fail(
            "Image", "python", image.python,
            f"local nodes run this interpreter ({local_python()}); use \"auto\" or run the client with it",
        )
    if image.apt:
        raise fail(
            "Image", "apt", image.apt,
            "sky.Local() does not install system packages on this machine; install them here "
            "(apt-get install ...) and remove them, or use a remote provider",
        )
    if image.excludes:
        raise fail("Image", "excludes", image.excludes, "local nodes use includes in place, nothing is shipped; remove it")
    if image.pip_indexes and not image.pip:
        name = "pip_extra_index_url" if image.pip_extra_index_url else "pip_indexes"
        raise fail("Image", name, getattr(image, name), "it only applies to Image.pip packages; add them or remove it")
    if image.skyward_source not in ("auto", "local"):
        raise fail("Image", "skyward_source", image.skyward_source, 'local nodes use this copy; use "auto"')
    for include in image.includes:
        if not os.path.exists(include):
            raise fail("Image", "includes", include, "the path does not exist")


def _machine() -> str:
    """This machine's architecture as Spec names it ("x86_64" or "arm64")."""
    return {"aarch64": "arm64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())


def _sys_path(image: Image, isolated: bool = False) -> tuple[str, ...]:
    """The client's import path (its cwd first), plus the parent dirs of includes. An
    ``isolated`` agent (in the Image's venv) gets no site directories from here: its
    venv appends the client's after its own, so the Image's packages come first."""
    extra = []
    for include in image.includes:
        path = os.path.abspath(include)
        extra.append(os.path.dirname(path) if path.endswith(".py") or os.path.isdir(path) else path)
    own = [p for p in sys.path if not (isolated and (p in client_site_dirs() or _in_stdlib(p)))]
    paths = [os.getcwd(), *extra, *own]
    return tuple(dict.fromkeys(p for p in paths if p))


def _in_stdlib(path: str) -> bool:
    """Whether ``path`` is part of the interpreter's own installation (the venv has those too)."""
    return os.path.realpath(path).startswith(os.path.realpath(sys.base_prefix) + os.sep)


def _gcs_port() -> int:
    gcs = ray.get_runtime_context().gcs_address
    return int(gcs.rsplit(":", 1)[1]) if gcs and ":" in gcs else 0


def _info(node: int, pool_id: str, port: int, count: int) -> InstanceInfo:
    """Node ``node``'s place in a pool of ``count`` nodes (for a node that joins later,
    the engine sends the real membership with its first task)."""
    return InstanceInfo(
        node=node,
        worker=0,
        total_nodes=count,
        workers_per_node=1,
        accelerators=0.0,
        total_accelerators=0.0,
        head_addr="127.0.0.1",
        head_port=port,
        job_id=pool_id,
        peers=[PeerInfo(rank, "127.0.0.1", None) for rank in range(count)],
        accelerator=None,
        network=NetworkInfo("lo", None),
    )
