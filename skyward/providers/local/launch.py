"""How a local pool starts: the private Ray instance, one agent per node, the transport
to them and the membership that adds and removes agents. Loaded when the first local pool
opens, so ``import skyward`` does not import Ray."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import ray
from msgspec import structs

from skyward.collections.config import CollectionsConfig, host_count
from skyward.collections import installed
from skyward.collections.installed import DriverCollections
from skyward.core.instance import InstanceInfo, NetworkInfo, PeerInfo
from skyward.engine import death
from skyward.engine.transports.lane import lane_path
from skyward.engine.transports.ray_actors import RayTransport
from skyward.engine.wire import encode
from skyward.image.image import Image
from skyward.model.cluster import Cluster
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Options, Spec
from skyward.node.agent import AgentSetup, start_agents, stop_agents, stop_started, wait_ready
from skyward.observe.metrics import resolve as resolve_metrics
from skyward.plugins.hooks import agent_launch, bootstrap_ops, with_plugins_image
from skyward.plugins.node import pack
from skyward.providers.base import LaunchedCluster, PhaseTiming
from skyward.providers.kept.request import ClientContext
from skyward.providers.local import env as local_env
from skyward.providers.local.env import client_site_dirs
from skyward.providers.local.provider import Local, check_image, local_handle
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.local.reaper import KEEP_ENVIRONMENT, MARKER
from skyward.providers.ray.agents import AgentMembership, Placement

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent

DEFAULT_READY_TIMEOUT = 120.0


def start(
    spec: Spec, options: Options, pool_id: str, context: ClientContext | None = None, detached: bool = False,
) -> LaunchedCluster:
    """Start (or share) the local Ray instance and one agent per node of the pool's floor;
    blocks until every agent answers or ``Options.provision_timeout`` passes, and undoes
    what it started if a step fails. ``context``: the client the agents work for, when
    it is not this process (the pool daemon's kept pools; then each agent gets the
    client's environment under its own).
    ``detached``: a kept pool's agents, named and outliving this process (``rejoin``
    finds them again)."""
    started = time.monotonic()
    client = context or ClientContext.here()
    count = spec.node_count.floor
    LocalRay.acquire()
    engine = time.monotonic() - started
    agents: list[ActorHandle[NodeAgent]] = []
    collections: CollectionsConfig | None = None
    try:
        port = _gcs_port()
        worker = options.resolved_worker
        first = [_info(node, pool_id, port, count) for node in range(count)]
        view = Cluster(tuple(local_handle(pool_id, n) for n in range(count)), tuple(first), Local.name, spec, worker)
        spec = with_plugins_image(spec, view)
        check_image(spec.image)
        built = local_env.prepare(
            spec.image, bootstrap_ops(spec.plugins, structs.replace(view, spec=spec)), spec.image.bootstrap_timeout
        )
        env = {**built.env}
        sys_path = _sys_path(spec.image, client, isolated=built.python is not None)
        if context is not None:
            env = {**_client_env(context.environ), **env}
        metrics = resolve_metrics(spec.image.metrics)
        collections = collections_config(spec, options, pool_id)
        notes = notes_dir(pool_id)
        plugins = pack(spec.plugins)

        def place(node: int) -> Placement:
            info = _info(node, pool_id, port, max(count, node + 1))
            lane = agent_lane(pool_id, node)
            setup = AgentSetup(
                info, worker, client.cwd, sys_path, env, metrics, collections, lane=lane, notes=notes,
                plugins=plugins, launch=agent_launch(spec.plugins, built.python, info),
            )
            kept = _kept_options(pool_id, node) if detached else {}
            return Placement(setup, local_handle(pool_id, node), options=kept, lane=lane)

        placements = [place(node) for node in range(count)]
        setups = [placement.setup for placement in placements]
        timeout = options.provision_timeout or DEFAULT_READY_TIMEOUT
        agents = start_agents(setups, [placement.options for placement in placements])
        hosts = installed.start_hosts_if_enabled(collections, detached=True)  # after the agents: their workers start first
        wait_ready(agents, timeout, "on this machine", "raise Options.provision_timeout or use fewer nodes")
        installed.settle_hosts(hosts, timeout)
    except BaseException:
        try:
            stop_started(agents, collections)
        finally:
            LocalRay.release()
        raise

    building = sum(seconds for _, seconds in built.phases)
    phases = (
        PhaseTiming("engine", engine),
        *(PhaseTiming(name, seconds) for name, seconds in built.phases),
        PhaseTiming("agents", time.monotonic() - started - engine - building),
    )
    return _cluster(
        agents, [placement.lane for placement in placements], [placement.handle for placement in placements],
        [placement.setup.info for placement in placements], place, timeout, notes, collections, phases,
    )


def rejoin(spec: Spec, options: Options, pool_id: str, count: int, timeout: float) -> LaunchedCluster:
    """The kept pool ``pool_id`` of ``count`` nodes that a pool daemon started with
    ``detached`` agents, found again on the Ray instance this process has joined (a dead
    daemon's successor adopting it). LookupError naming the node when an agent is gone
    or does not answer within ``timeout``; nothing is stopped then (the caller decides)."""
    LocalRay.acquire()
    try:
        agents = []
        for node in range(count):
            try:
                agents.append(ray.get_actor(kept_agent_name(pool_id, node), namespace="skyward"))
            except ValueError:
                raise LookupError(f"node {node} of the kept pool {pool_id[:12]} is gone") from None
        try:
            wait_ready(agents, timeout, "on this machine", "end it with `sky down`")
        except Exception as exc:
            raise LookupError(f"the kept pool {pool_id[:12]} does not answer: {exc}") from None
    except BaseException:
        LocalRay.release()
        raise
    port = _gcs_port()
    notes = notes_dir(pool_id)

    def place(node: int) -> Placement:
        raise NotImplementedError(
            f"node {node} cannot join the kept pool {pool_id[:12]}: a pool adopted by a new pool daemon after its "
            "own died keeps its size until it ends"
        )

    return _cluster(
        agents, [agent_lane(pool_id, node) for node in range(count)],
        [local_handle(pool_id, node) for node in range(count)], [_info(node, pool_id, port, count) for node in range(count)],
        place, timeout, notes, collections_config(spec, options, pool_id), (),
    )


def kept_agent_name(pool_id: str, node: int) -> str:
    """The Ray actor name of node ``node``'s agent of the kept pool ``pool_id``."""
    return f"skyward-kept-{pool_id[:12]}-{node}"


def _kept_options(pool_id: str, node: int) -> dict[str, object]:
    """A kept pool's agent: named, and outliving the process that started it."""
    return {"name": kept_agent_name(pool_id, node), "lifetime": "detached"}


def _cluster(
    agents: list[ActorHandle[NodeAgent]], lanes: list[str], nodes: list[NodeHandle], infos: list[InstanceInfo],
    place: Callable[[int], Placement], timeout: float, notes: str, collections: CollectionsConfig,
    phases: tuple[PhaseTiming, ...],
) -> LaunchedCluster:
    """The running pool of ``agents`` (node i: ``lanes[i]``, ``nodes[i]``, ``infos[i]``):
    their transport, membership, collections and ``stop`` (the agents, then this
    process's share of Ray)."""
    transport = RayTransport(
        agents, lanes, postmortem=lambda node: death.cause_of_death(notes, node) if notes else None,
    )
    membership = AgentMembership(transport, dict(enumerate(agents)), place, timeout, "on this machine")

    def stop() -> None:
        try:
            stop_agents(membership.close())
        finally:
            LocalRay.release()

    return LaunchedCluster(
        tuple(nodes), tuple(infos), transport, encode, DriverCollections(collections), stop, phases,
        membership=membership,
    )


def _client_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A client's environment as its agents take it: without Ray's own variables, nor a
    local pool's mark (``MARKER``, ``KEEP_ENVIRONMENT``) the client may carry, which would
    put what the agents start under that pool's sweep and out of their own instance's."""
    return {
        key: value for key, value in environ.items()
        if not key.startswith("RAY_") and key not in (MARKER, KEEP_ENVIRONMENT)
    }


def notes_dir(pool_id: str) -> str:
    """Where the pool's agents leave their post-mortem notes: in the private Ray
    instance's temp dir (removed with it), or "" when Ray is not ours."""
    temp = LocalRay.temp_dir()
    return os.path.join(temp, f"notes-{pool_id[:12]}") if temp else ""


def agent_lane(pool_id: str, node: int) -> str:
    """Where node ``node``'s agent of the pool listens: in the private Ray instance's
    temp dir, or "" when there is no usable place (``lane_path``)."""
    return lane_path(LocalRay.temp_dir(), pool_id, node)


def collections_config(spec: Spec, options: Options, pool_id: str) -> CollectionsConfig:
    """The pool's collections: their hosts listen beside the agents' lanes."""
    return CollectionsConfig(
        pool_id, host_count(spec.node_count.ceiling), options.collections_enabled, lanes_dir=LocalRay.temp_dir() or ""
    )


def _sys_path(image: Image, client: ClientContext, isolated: bool = False) -> tuple[str, ...]:
    """The client's import path (its cwd first), plus the parent dirs of includes. An
    ``isolated`` agent (in the Image's venv) gets no site directories from here: its
    venv appends the client's after its own, so the Image's packages come first."""
    extra = []
    for include in image.includes:
        path = os.path.abspath(os.path.join(client.cwd, include))
        extra.append(os.path.dirname(path) if path.endswith(".py") or os.path.isdir(path) else path)
    own = [p for p in client.sys_path if not (isolated and (p in client_site_dirs() or _in_stdlib(p)))]
    paths = [client.cwd, *extra, *own]
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
