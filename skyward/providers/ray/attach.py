"""How a ``sky.Ray`` pool attaches: this process's one connection to the cluster (shared by
its pools), the agents pinned to the chosen nodes and the membership that adds and removes
them. Loaded when such a pool opens, so ``import skyward`` does not import Ray.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

import psutil
import ray

from skyward.collections import installed
from skyward.collections.config import CollectionsConfig, host_count
from skyward.collections.installed import DriverCollections
from skyward.core.instance import AcceleratorInfo, InstanceInfo, NetworkInfo, PeerInfo
from skyward.core.validation import fail
from skyward.engine.membership import Loss
from skyward.engine.transports.ray_actors import RayTransport
from skyward.engine.wire import encode
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Options, Spec
from skyward.node.agent import AgentSetup, start_agents, stop_agents, stop_started, wait_ready
from skyward.observe.metrics import resolve as resolve_metrics
from skyward.providers.base import LaunchedCluster, PhaseTiming
from skyward.providers.local import ray_instance as local_ray
from skyward.providers.ray.agents import AgentMembership, Placement
from skyward.providers.ray.provider import Ray

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from skyward.node.agent import NodeAgent

DEFAULT_CONNECT_TIMEOUT = 60.0
DEFAULT_READY_TIMEOUT = 120.0
NAMESPACE = "skyward"
_HEAD_RESOURCE = "node:__internal_head__"
HOST_SHARE = 0.001
"""How much of the head's own resource a collection host asks for (to live there: the
pool never takes the cluster's head away)."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RayNode:
    """An alive node of the cluster as ``ray.nodes()`` describes it: its id, the address
    its node manager listens at, and its resources."""

    id: str
    address: str
    resources: dict[str, float]

    @property
    def head(self) -> bool:
        return _HEAD_RESOURCE in self.resources


def launch_on_cluster(provider: Ray, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
    """Connect ``provider``'s cluster (or share this process's connection), pin one
    agent per chosen node; blocks until every agent answers or
    ``Options.provision_timeout`` passes."""
    started = time.monotonic()
    host, port = provider.resolved_address()
    connect_timeout = float(options.provision_timeout or DEFAULT_CONNECT_TIMEOUT)
    Attachment.acquire(host, port, provider.token or os.environ.get("RAY_AUTH_TOKEN") or None, connect_timeout)
    engine = time.monotonic() - started
    agents: list[ActorHandle[NodeAgent]] = []
    collections: CollectionsConfig | None = None
    where = f"on the Ray cluster at {host}:{port}"
    try:
        chosen = _choose_nodes(provider, spec, f"{host}:{port}")
        infos = _infos(chosen, _gcs_port(), pool_id)
        worker = options.resolved_worker
        env = {**spec.image.env}
        metrics = resolve_metrics(spec.image.metrics)
        ceiling = max(len(chosen), spec.node_count.ceiling)
        collections = CollectionsConfig(
            pool_id, host_count(ceiling), options.collections_enabled, ((_HEAD_RESOURCE, HOST_SHARE),)
        )
        here = _local_addresses()

        def setup_on(node: RayNode, info: InstanceInfo) -> AgentSetup:
            local = node.address in here
            cwd, sys_path = (os.getcwd(), _sys_path()) if local else (".", ())
            return AgentSetup(info, worker, cwd, sys_path, env, metrics, collections)

        agents = start_agents(
            [setup_on(node, info) for node, info in zip(chosen, infos)],
            [{"scheduling_strategy": _on(node)} for node in chosen],
        )
        # before any task (no other process starts them), and ending with this client, as the
        # agents do: a client that dies leaves nothing on the user's cluster
        hosts = installed.start_hosts_if_enabled(collections, detached=False)
        ready_timeout = float(options.provision_timeout or DEFAULT_READY_TIMEOUT)
        wait_ready(
            agents, ready_timeout, where,
            "check that its nodes have this skyward and Python installed, or raise Options.provision_timeout",
        )
        installed.settle_hosts(hosts, ready_timeout)
    except BaseException:
        try:
            stop_started(agents, collections)
        finally:
            Attachment.release()
        raise
    used = {rank: node.id for rank, node in enumerate(chosen)}
    transport = RayTransport(agents)
    lock = threading.Lock()

    def place(rank: int) -> Placement:
        with lock:
            free = [node for node in _alive() if node.id not in used.values()]
            if not free:
                raise RuntimeError(f"every alive node of the Ray cluster at {host}:{port} runs an agent of this pool")
            node = free[0]
            used[rank] = node.id
        [info] = _infos([node], _gcs_port(), pool_id)
        info = replace(info, node=rank, peers=[PeerInfo(rank, node.address, None)])
        handle = NodeHandle(node.id, node.address, instance_type="ray-node")
        return Placement(setup_on(node, info), handle, {"scheduling_strategy": _on(node)})

    def lost(agents: dict[int, ActorHandle[NodeAgent]]) -> list[Loss]:
        alive = {node.id for node in _alive()}
        return [
            Loss(rank, f"Ray node {used[rank]} of the cluster at {host}:{port} is no longer alive")
            for rank in agents if used.get(rank) not in alive
        ]

    def released(rank: int) -> None:
        with lock:
            used.pop(rank, None)

    membership = AgentMembership(
        transport, dict(enumerate(agents)), place, ready_timeout, where, lambda: len(_alive()), lost, released
    )

    def stop() -> None:
        try:
            stop_agents(membership.close())
        finally:
            Attachment.release()

    phases = (PhaseTiming("engine", engine), PhaseTiming("agents", time.monotonic() - started - engine))
    nodes = tuple(NodeHandle(n.id, n.address, instance_type="ray-node") for n in chosen)
    return LaunchedCluster(
        nodes, tuple(infos), transport, encode, DriverCollections(collections, owned=hosts), stop, phases, membership
    )

def _choose_nodes(provider: Ray, spec: Spec, address: str) -> list[RayNode]:
    """The nodes the pool opens with: the first ``Ray.nodes`` or ``Nodes.floor`` of
    an elastic spec; else ``desired`` when above 1; else every alive node."""
    alive = _alive()
    count = spec.node_count
    if provider.nodes is not None:
        wanted: int | None = provider.nodes
    elif count.elastic:
        wanted = count.floor
    else:
        wanted = count.desired if count.desired > 1 else None
    if wanted is None:
        return alive
    if wanted > len(alive):
        owner, name = ("Ray", "nodes") if provider.nodes is not None else ("Spec", "nodes")
        raise fail(
            owner, name, wanted,
            f"the Ray cluster at {address} has {len(alive)} alive node(s); ask for at most that many, "
            "or leave it unset to use them all",
        )
    return alive[:wanted]


class Attachment:
    """This process's connection to an existing cluster, shared by the ``sky.Ray`` pools
    open on it at the same time (reference-counted). Ray must be shut down by the thread
    that started it, so one owner thread connects and disconnects."""

    _lock = threading.Lock()
    _users = 0
    _address: str | None = None
    _owned = False
    _saved_env: dict[str, str | None] = {}
    _owner: _OwnerThread  # set below the class

    @classmethod
    def acquire(cls, host: str, port: int, token: str | None, timeout: float) -> None:
        address = f"{host}:{port}"
        with cls._lock:
            if cls._users > 0:
                if _same_cluster(cls._address, address):
                    cls._users += 1
                    return
                raise RuntimeError(
                    f"this process is attached to the Ray cluster at {cls._address}; a process holds one Ray "
                    f"connection, so sky.Ray(address={address!r}) cannot open now: close that pool first, "
                    "or open this one from another process"
                )
            if local_ray.LocalRay.in_use():
                raise RuntimeError(
                    "a sky.Local() pool is open in this process and holds its private Ray; a process holds "
                    f"one Ray connection, so sky.Ray(address={address!r}) cannot attach now: close the local "
                    "pool first, or run this pool in another process"
                )
            if ray.is_initialized():
                current = ray.get_runtime_context().gcs_address
                if not _same_cluster(current, address):
                    raise RuntimeError(
                        f"Ray is already initialised in this process (connected to {current}, by a ray.init() "
                        f"outside skyward); a process holds one Ray connection: call ray.shutdown() first, "
                        f"or use sky.Ray(address={current!r})"
                    )
                cls._owned = False  # the user's connection: used as it is, never shut down by us
            else:
                _reachable(host, port, min(timeout, 10.0))
                future = cls._owner.submit(cls._connect, address, token)
                try:
                    future.result(timeout=timeout)
                except FutureTimeout:
                    cls._owner.submit(cls._disconnect)  # runs once the stuck ray.init returns
                    raise TimeoutError(
                        f"Ray.address={address!r}: connecting took more than {timeout:g}s; check that it is the "
                        "cluster's GCS address, or raise Options.provision_timeout"
                    ) from None
                except ConnectionError as exc:
                    raise ConnectionError(_connect_failure(address, token, exc)) from exc
                cls._owned = True
            cls._address = address
            local_ray.attached_address = address
            cls._users = 1

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0:
                try:
                    if cls._owned:
                        cls._owner.submit(cls._disconnect).result()
                finally:
                    cls._owned = False
                    cls._address = None
                    local_ray.attached_address = None

    @classmethod
    def _connect(cls, address: str, token: str | None) -> None:
        env = {"RAY_USAGE_STATS_ENABLED": "0"}
        if token:
            env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
            env_drop: tuple[str, ...] = ("RAY_AUTH_TOKEN_PATH",)
        else:
            env_drop = ()
        cls._saved_env = {key: os.environ.get(key) for key in (*env, *env_drop)}
        os.environ.update(env)
        for key in env_drop:
            os.environ.pop(key, None)
        _reset_auth()
        for name in ("ray", "ray._private", "ray._raylet"):
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR)
        except BaseException:
            cls._disconnect()
            raise

    @classmethod
    def _disconnect(cls) -> None:
        try:
            if ray.is_initialized():
                ray.shutdown()
        finally:
            local_ray.restore_environment(cls._saved_env)
            cls._saved_env = {}
            _reset_auth()


class _OwnerThread:
    """One daemon thread running what it is given in order. Daemon, unlike a
    ThreadPoolExecutor's: a ``ray.init`` stuck on a silent address must not keep the
    client process from exiting after we gave up on it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)

        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(run)
        return future

    def _loop(self) -> None:
        while True:
            self._queue.get()()


Attachment._owner = _OwnerThread("skyward-ray-attach")


def _reachable(host: str, port: int, timeout: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        raise ConnectionError(
            f"Ray.address='{host}:{port}' is not reachable ({exc or type(exc).__name__}); check that the "
            "cluster is running (`ray status` on its head prints the address) and that this machine can "
            "reach that port"
        ) from None


def _connect_failure(address: str, token: str | None, exc: BaseException) -> str:
    text = f"{exc} {exc.__cause__}"
    auth = "auth" in text.lower() or "unauthenticated" in text.lower()
    if token:
        hint = "the token given (Ray.token or RAY_AUTH_TOKEN) may be wrong; check it with `ray get-auth-token` on the head"
    else:
        hint = (
            "if the cluster runs with token auth (RAY_AUTH_MODE=token), pass its token as "
            "sky.Ray(token=...) or set RAY_AUTH_TOKEN"
        )
    reason = "the cluster refused the connection's authentication" if auth else "Ray could not connect"
    return f"Ray.address={address!r}: {reason}; {hint} (Ray said: {exc})"


def _same_cluster(a: str | None, b: str) -> bool:
    if a is None:
        return False
    return _canonical(a) == _canonical(b)


def _canonical(address: str) -> str:
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address) or address
    except Exception:  # Ray internals moved: compare as given
        return address


def _reset_auth() -> None:
    """Make Ray re-read its auth settings: it caches the mode at import and the first
    token it loads (``local.ray_instance`` uses a per-process token of its own)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # not in Ray's stubs

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except Exception:  # older Ray: no token auth to reset
        pass


def _alive() -> list[RayNode]:
    """The cluster's alive nodes, head first, then by address."""
    return sorted(
        (_node(n) for n in ray.nodes() if n.get("Alive")),
        key=lambda n: (not n.head, n.address, n.id),
    )


def _node(described: dict[str, object]) -> RayNode:
    """A node of ``ray.nodes()`` (its ``NodeID``, ``NodeManagerAddress`` and ``Resources``)."""
    resources = described.get("Resources") or {}
    if not isinstance(resources, dict):
        raise TypeError(f"Ray described a node's resources as {resources!r}")
    return RayNode(
        str(described["NodeID"]), str(described["NodeManagerAddress"]),
        {str(name): float(amount) for name, amount in resources.items()},
    )


def _gcs_port() -> int:
    gcs = ray.get_runtime_context().gcs_address
    return int(gcs.rsplit(":", 1)[1]) if gcs and ":" in gcs else 0


def _on(node: RayNode) -> NodeAffinitySchedulingStrategy:
    """Pin to ``node`` (hard affinity: an agent never runs elsewhere)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node.id, soft=False)


def _accelerator(resources: dict[str, float]) -> AcceleratorInfo | None:
    count = float(resources.get("GPU", 0.0))
    kinds = [key.split(":", 1)[1] for key in resources if key.startswith("accelerator_type:")]
    if count <= 0:
        for name in ("TPU", "neuron_cores", "HPU", "NPU"):
            if resources.get(name, 0.0) > 0:
                return AcceleratorInfo(kinds[0] if kinds else name, float(resources[name]), None, name == "neuron_cores")
        return None
    return AcceleratorInfo(kinds[0] if kinds else "GPU", count)


def _infos(nodes: list[RayNode], gcs_port: int, pool_id: str) -> list[InstanceInfo]:
    count = len(nodes)
    peers = [PeerInfo(index, node.address, None) for index, node in enumerate(nodes)]
    accelerators = [_accelerator(node.resources) for node in nodes]
    total = sum(a.count for a in accelerators if a is not None)
    head = nodes[0].address
    return [
        InstanceInfo(
            node=index, worker=0, total_nodes=count, workers_per_node=1,
            accelerators=accelerator.count if accelerator else 0.0, total_accelerators=total,
            head_addr=head, head_port=gcs_port, job_id=pool_id, peers=peers, accelerator=accelerator,
            network=NetworkInfo("lo" if node.address.startswith("127.") else "eth0", None),
        )
        for index, (node, accelerator) in enumerate(zip(nodes, accelerators))
    ]


def _local_addresses() -> set[str]:
    found = {"127.0.0.1", "::1", "localhost", socket.gethostname()}
    try:
        for entries in psutil.net_if_addrs().values():
            found.update(entry.address for entry in entries)
    except Exception:
        pass
    return found


def _sys_path() -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in (os.getcwd(), *sys.path) if p))
