"""A simulated pool of many cheap nodes behind the real head relay, for the scale
benchmark (benchmarks/bench_simulated.py).

``SimulatedProvider`` opens a pool whose client side is all real: the client, driver,
scheduler, event bus and console, speaking the relay protocol (``core.messages``,
authenticated, compressed where it pays) over a Unix socket to a real ``RelayServer``.
That server runs in a process of its own (``python tests/simulated_cluster.py``), as a
remote pool's head relay does on node 0, so the client's CPU is the client's alone. Only
the nodes behind it are simulated: ``SimulatedBackend`` answers each node's calls as an
agent would (the request decoded, run by ``node.execution.execute`` as an agent runs it,
the outcome encoded as an agent's reply) inline on the relay's event loop, so a thousand
nodes cost a thousand small objects, not a thousand processes or threads. Work on them is
therefore serial within the relay process: the simulation is for trivial tasks, where what
is measured is the control plane's cost per call, per item and per node.

While the client listens for metrics, every node sends what a one-GPU node's sampler
sends (``METRICS``) once a second. A ``Behaviour`` gives tasks simulated work (waited on
the relay's loop, so the nodes work at the same time; ``attempt`` counts each item's
runs) and makes nodes vanish at a rate, each reported lost as a spot machine taken back.
Provisioning is simulated with ``delay`` (each node's launch waits that long; a share
``refused`` fails), and ``SimulatedMembership`` lets the engine's reconciler and
autoscaler add and remove nodes through the relay (``Attach``/``Detach``), as on a remote
pool.

With ``Behaviour.lanes`` the relay reaches each node as a remote pool's head relay
reaches the agents of the other hosts: through a real lane (``transports.lane``), a TCP
connection per node that proves the pool's lane secret before a frame is read, to a
``LaneServer`` per node. Those simulated agents run in ``AGENT_HOSTS`` processes of their
own (``python tests/simulated_cluster.py --agents``), started by the relay, each serving
its share of the nodes on threads as an agent does; their work then runs beside the
relay's, not on its loop. A broadcast's shared payload (Ray's object store on a real
pool) and nodes that join later are still answered on the relay's loop. Not simulated
(yet): task output, collections (the pool has none), Ray itself.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from fake_cluster import NoCollections

import skyward as sky
from skyward.core import handshake
from skyward.core.instance import InstanceInfo, NetworkInfo, PeerInfo
from skyward.core.open_files import raise_open_files
from skyward.engine.events import EventBatch
from skyward.engine.membership import Floor, Joined, Loss
from skyward.engine.relay_server import RelayServer, Sink
from skyward.engine.transport import NodeLost, NoReply, Refused, Shared
from skyward.engine.transports.lane import TCP, LaneBroken, LaneClient, LaneFailed, LaneServer
from skyward.engine.transports.relay import RelayEndpoint, RelayTransport, RemoteAgent
from skyward.engine.wire import MAP, Payload, TaskFailure, TaskRequest, decode_request, encode
from skyward.model.nodes import NodeHandle
from skyward.node.execution import execute
from skyward.observe.events import Metric
from skyward.providers.base import LaunchedCluster, Offer

READY_TIMEOUT = 30.0
"""Seconds the relay process has to say it listens."""
SAMPLE_EVERY = 1.0
"""Seconds between a simulated node's metric samples."""
METRICS = (("cpu", "%"), ("memory", "%"), ("memory_used", "MB"), ("memory_total", "MB"), ("gpu", "%"),
           ("gpu_memory", "%"), ("gpu_memory_total", "MB"), ("gpu_temp", "C"))
"""What a node with one GPU samples (``observe.metrics``'s collectors)."""
AGENT_HOSTS = 4
"""Processes the simulated agents of a pool with lanes run in (``Behaviour.lanes``)."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the simulated nodes behave: ``item_seconds`` of simulated work per call or map
    item (waited, not computed, so nodes work at the same time); ``losses_per_minute``:
    the share of the nodes (node 0 spared) that vanish each minute, each reported lost as
    a spot machine taken back; ``seed``: which ones; ``lanes``: the relay calls each node
    through a real TCP lane to its agent in another process (see the module);
    ``resume_within``: the seconds the relay and the client keep a session whose stream
    broke for a new stream to resume (a remote pool's ``Spec.ttl``; 0: none)."""

    item_seconds: float = 0.0
    losses_per_minute: float = 0.0
    seed: int = 0
    lanes: bool = False
    resume_within: float = 0.0


class SimulatedBackend:
    """The relay's backend over ``nodes`` simulated nodes (see the module)."""

    def __init__(self, nodes: int, sink: Sink, behaviour: Behaviour = Behaviour(),
                 lanes: dict[int, LaneClient] | None = None) -> None:
        self._alive = set(range(nodes))
        self._lanes = lanes or {}
        self._sink = sink
        self._behaviour = behaviour
        self._published: dict[int, int] = {}
        self._sampling: asyncio.Task[None] | None = None
        self._losing = asyncio.get_running_loop().create_task(self._lose()) if behaviour.losses_per_minute else None
        self._keys = 0
        self._shared: dict[int, TaskRequest] = {}
        """A shared payload (a broadcast's), decoded once for every node: each real node
        decodes its own copy at the same time as the others, so decoding it once per node
        in a row would measure the simulation, not the pool."""

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if node not in self._alive:
            raise NodeLost(node, f"simulated node {node} is gone")
        lane = self._lanes.get(node)
        if lane is not None and isinstance(payload, bytes):
            reply = await _via_lane(node, lane, payload, timeout)
            if node not in self._alive:
                raise NodeLost(node, f"simulated node {node} vanished while it worked")
            return reply
        try:
            if not isinstance(payload, Shared):
                request: TaskRequest = decode_request(payload)
            elif (found := self._shared.get(payload.key)) is not None:
                request = found
            else:
                request = self._shared[payload.key] = decode_request(payload.handle)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - answered as an agent answers an unloadable task
            return _unloadable(exc, node)
        reply = _answer(request, node)
        if self._behaviour.item_seconds:  # the work's time, after its effects (an attempt lost midway ran)
            await asyncio.sleep(_work_seconds(request, self._behaviour))
            if node not in self._alive:
                raise NodeLost(node, f"simulated node {node} vanished while it worked")
        return reply

    async def share(self, payload: Payload) -> Shared:
        self._keys += 1
        return Shared(self._keys, payload)

    def unshare(self, shared: Shared) -> None:
        self._shared.pop(shared.key, None)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        raise NotImplementedError("the simulated pool has no distributed collections")

    def forget_collection(self, call_id: int) -> None:
        pass

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        self._alive.add(node)
        return b""

    def detach(self, node: int, reason: str) -> None:
        self._alive.discard(node)

    async def _lose(self) -> None:
        """Take ``losses_per_minute`` of the nodes away each minute, one at a time."""
        chosen = random.Random(self._behaviour.seed)
        while True:
            await asyncio.sleep(60 / max(1.0, self._behaviour.losses_per_minute * len(self._alive)))
            candidates = sorted(self._alive - {0})
            if candidates:
                node = chosen.choice(candidates)
                self._alive.discard(node)
                self._sink.lost(node, "simulated: the spot machine was taken back", True)

    def set_metrics(self, on: bool) -> None:
        """Every node samples ``METRICS`` once a second while someone listens, as a GPU node's sampler does."""
        if on and self._sampling is None:
            self._sampling = asyncio.get_running_loop().create_task(self._sample())
        elif not on and self._sampling is not None:
            self._sampling.cancel()
            self._sampling = None

    async def _sample(self) -> None:
        """On a fixed grid, as ``MetricSampler`` keeps its collectors': a round of 1,000
        nodes' batches takes tens of milliseconds, which a sleep after each round would
        add to every period, sending fewer than one round a second."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            for node in sorted(self._alive):
                self._published[node] = self._published.get(node, 0) + len(METRICS)
                batch = EventBatch([Metric(node, name, 50.0, unit) for name, unit in METRICS], 0, self._published[node])
                self._sink.events(node, batch.encode())
            due = max(due + SAMPLE_EVERY, loop.time())
            await asyncio.sleep(due - loop.time())

    def release_holds(self) -> None:
        pass

    def end(self) -> None:
        for task in (self._losing, self._sampling):
            if task is not None:
                task.cancel()
        for lane in self._lanes.values():
            lane.close()


def _answer(request: TaskRequest, node: int) -> Payload:
    """Node ``node``'s reply to ``request``, encoded as an agent encodes its outcome."""
    return encode((*execute(request, node), 0))


def _unloadable(error: Exception, node: int) -> Payload:
    return encode((False, TaskFailure.from_exception(error, node), 0))


def _work_seconds(request: TaskRequest, behaviour: Behaviour) -> float:
    return behaviour.item_seconds * (len(request.chunk) if request.kind == MAP else 1)


async def _via_lane(node: int, lane: LaneClient, payload: bytes, timeout: float | None) -> Payload:
    """Node ``node``'s reply through its lane; its failures as the head relay's transport
    reports them (``transports.ray_actors``), and a lane that takes nothing as refused
    (a real relay would send through Ray instead: here it is a broken simulation)."""
    try:
        reply = await lane.call_async(payload, timeout)
    except LaneBroken as exc:
        raise NodeLost(node, str(exc)) from None
    except TimeoutError:
        raise NoReply(node, "no answer in time") from None
    except LaneFailed as exc:
        raise Refused(node, str(exc)) from None
    if reply is None:
        raise Refused(node, f"simulated node {node}: nothing took the call on its lane {lane.address}")
    return reply


def host_agents(first: int, count: int, behaviour: Behaviour) -> None:
    """Be the agents of nodes ``first`` to ``first + count - 1``: a TCP lane each on
    loopback, proven with the secret on stdin's first line (hex), each call answered on
    the lane's thread as an agent answers it. Print the lanes' addresses (one JSON list)
    once they listen; serve until stdin ends (the relay closed it, or died)."""
    raise_open_files()
    secret = bytes.fromhex(sys.stdin.readline().strip())

    def agent(node: int) -> Callable[[bytes], Payload]:
        def handle(frame: bytes) -> Payload:
            try:
                request: TaskRequest = decode_request(frame)
            except Exception as exc:  # noqa: BLE001 - answered as an agent answers an unloadable task
                return _unloadable(exc, node)
            reply = _answer(request, node)
            if behaviour.item_seconds:
                time.sleep(_work_seconds(request, behaviour))
            return reply
        return handle

    servers = [LaneServer(f"{TCP}127.0.0.1:0", agent(node), secret) for node in range(first, first + count)]
    print(json.dumps([server.address for server in servers]), flush=True)
    sys.stdin.read()
    for server in servers:
        server.close()


def _start_agents(nodes: int, behaviour: Behaviour) -> tuple[list[subprocess.Popen[str]], dict[int, LaneClient]]:
    """``AGENT_HOSTS`` processes serving the lanes of ``nodes`` nodes (``host_agents``),
    and a lane client to each node; RuntimeError if one does not start in time. The
    processes end when their stdin, kept open here, closes."""
    secret = handshake.new_secret()
    share = math.ceil(nodes / AGENT_HOSTS)
    hosts = []
    for first in range(0, nodes, share):
        host = subprocess.Popen(
            [sys.executable, __file__, "--agents", str(first), str(min(share, nodes - first)),
             json.dumps(dataclasses.asdict(behaviour))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert host.stdin is not None
        host.stdin.write(secret.hex() + "\n")
        host.stdin.flush()
        hosts.append(host)
    lanes: dict[int, LaneClient] = {}
    for first, host in zip(range(0, nodes, share), hosts, strict=True):
        said = _line_within(host, READY_TIMEOUT)
        if not said.startswith("["):
            _stop_agents(hosts)
            raise RuntimeError(f"the simulated agents from node {first} did not start (they said {said!r})")
        lanes.update({first + i: LaneClient(address, secret) for i, address in enumerate(json.loads(said))})
    return hosts, lanes


def _stop_agents(hosts: list[subprocess.Popen[str]]) -> None:
    for host in hosts:
        assert host.stdin is not None
        host.stdin.close()
    for host in hosts:
        try:
            host.wait(10)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()


_RUNS: collections.Counter[object] = collections.Counter()


def attempt(item: object) -> int:
    """How many times a task on a simulated node has been given ``item`` so far, this
    time included (for a map whose items are distinct: 1 for each item run once)."""
    _RUNS[item] += 1
    return _RUNS[item]


def serve(address: str, nodes: int, behaviour: Behaviour) -> None:
    """Serve one client on the Unix socket ``address`` (the secret: stdin's first line, in
    hex), over ``nodes`` simulated nodes; print ``listening`` once it does, exit when the
    client's session is over."""
    secret = bytes.fromhex(sys.stdin.readline().strip())
    raise_open_files()  # a lane per node, as the head relay does
    hosts, lanes = _start_agents(nodes, behaviour) if behaviour.lanes else ([], {})

    async def main() -> None:
        server = RelayServer(secret, lambda sink: SimulatedBackend(nodes, sink, behaviour, lanes), compress=True,
                             resume_within=behaviour.resume_within)
        listener = await asyncio.start_unix_server(server.handle, address)
        os.chmod(address, 0o600)
        print("listening", flush=True)
        await server.finished.wait()
        listener.close()

    try:
        asyncio.run(main())
    finally:
        _stop_agents(hosts)


def _info(node: int, count: int, pool_id: str) -> InstanceInfo:
    peers = [PeerInfo(rank, "127.0.0.1") for rank in range(count)] if count <= 16 else []
    return InstanceInfo(node, 0, count, 1, 0.0, 0.0, "127.0.0.1", 0, pool_id, peers, None, NetworkInfo("lo"))


class SimulatedMembership:
    """Nodes joining and leaving a simulated pool: a node takes ``delay`` seconds to
    provision, a share ``refused`` of the tries fail, then the relay's side attaches it;
    ``added`` counts every launch tried, ``most_at_once`` the most launching together."""

    def __init__(self, transport: RelayTransport, pool_id: str, delay: float, refused: float, seed: int) -> None:
        self._transport = transport
        self._pool_id = pool_id
        self._delay = delay
        self._refused = refused
        self._chosen = random.Random(seed)
        self._lock = threading.Lock()
        self.added: list[int] = []
        self.removed: list[int] = []
        self.most_at_once = 0
        self._launching = 0

    def capacity(self) -> int | None:
        return None

    def lowest(self) -> Floor:
        return Floor(1, "node 0 runs the pool's relay; close the pool to release it")

    def add(self, node: int) -> Joined:
        with self._lock:
            self.added.append(node)
            refused = self._chosen.random() < self._refused
            self._launching += 1
            self.most_at_once = max(self.most_at_once, self._launching)
        try:
            time.sleep(self._delay)
        finally:
            with self._lock:
                self._launching -= 1
        if refused:
            raise RuntimeError(f"node {node}: the simulated cloud has no capacity now")
        self._transport.attach(node, RemoteAgent(node, None, READY_TIMEOUT))
        handle = NodeHandle(f"{self._pool_id}-{node}-{len(self.added)}", "127.0.0.1", instance_type="simulated")
        return Joined(handle, _info(node, node + 1, self._pool_id))

    def remove(self, node: int) -> None:
        self._transport.detach(node, f"node {node} was removed")
        with self._lock:
            self.removed.append(node)

    def watch(self, lost: Callable[[Loss], None]) -> None:
        self._transport.watch_losses(lost)

    def check(self) -> list[Loss]:
        return []


@dataclass(frozen=True, slots=True)
class SimulatedProvider:
    """A pool of simulated nodes behind a real relay process (see the module); ``delay``:
    the seconds provisioning a node takes, ``refused``: the share of launches that fail;
    ``behaviour``: how the nodes work and vanish. ``memberships`` holds each pool's
    ``SimulatedMembership`` (its launches counted), ``relays`` each pool's relay process
    id; ``cut`` breaks the client's streams to the relay (a connection reset), ``mute``
    silences them (the client hears nothing more on them, as when its address changed);
    ``probe_after``: the client's ``RelayEndpoint.probe_after``, after which it cuts the
    silent streams (its ``revive``)."""

    name: ClassVar[str] = "simulated"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()
    delay: float = 0.0
    refused: float = 0.0
    behaviour: Behaviour = Behaviour()
    memberships: list[SimulatedMembership] = field(default_factory=list, compare=False, hash=False)
    relays: list[int] = field(default_factory=list, compare=False, hash=False)
    streams: list[tuple[asyncio.AbstractEventLoop, asyncio.StreamWriter]] = field(
        default_factory=list, compare=False, hash=False)
    probe_after: float = 0.0

    def cut(self) -> int:
        """Reset every stream the client has opened to its relay so far (each end sees its
        connection broken at once, as a NAT that dropped it answers); how many."""
        streams, self.streams[:] = list(self.streams), []
        for loop, writer in streams:
            loop.call_soon_threadsafe(writer.transport.abort)
        return len(streams)

    def mute(self) -> int:
        """Stop reading every stream the client has opened to its relay so far: the client
        hears nothing more on them, the relay's side stays open; how many."""
        streams, self.streams[:] = list(self.streams), []
        for loop, writer in streams:
            loop.call_soon_threadsafe(writer.transport.pause_reading)
        self.streams.extend(streams)  # still the client's, for ``cut``
        return len(streams)

    def validate(self, spec: sky.Spec, options: sky.Options) -> None:
        if spec.volumes:
            raise NotImplementedError("the simulated pool mounts no volumes")

    def offers(self, spec: sky.Spec) -> list[Offer]:
        return []

    def default_storage(self, spec: sky.Spec) -> sky.Storage | None:
        return None

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> LaunchedCluster:
        count = spec.node_count.floor
        time.sleep(self.delay)
        folder = tempfile.mkdtemp(prefix="simulated-relay-")
        address = os.path.join(folder, "relay.sock")
        secret = handshake.new_secret()
        path = os.pathsep.join(entry for entry in sys.path if entry)  # the client's modules, as a local pool's nodes
        behaviour = json.dumps(dataclasses.asdict(self.behaviour))
        relay = subprocess.Popen(
            [sys.executable, __file__, address, str(count), behaviour], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONPATH": path},
        )
        assert relay.stdin is not None and relay.stdout is not None
        relay.stdin.write(secret.hex() + "\n")
        relay.stdin.close()
        ready = _line_within(relay, READY_TIMEOUT)
        if ready != "listening":
            relay.kill()
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"the simulated relay did not start (it said {ready!r})")

        def stop() -> None:
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
            shutil.rmtree(folder, ignore_errors=True)

        infos = tuple(_info(node, count, pool_id) for node in range(count))
        nodes = tuple(NodeHandle(f"{pool_id}-{i}", "127.0.0.1", instance_type="simulated") for i in range(count))
        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            reader, writer = await asyncio.open_unix_connection(address)
            self.streams.append((asyncio.get_running_loop(), writer))
            return reader, writer

        async def revive() -> None:
            self.cut()

        client = RelayTransport(RelayEndpoint(connect, address, secret, compress=True,
                                              resume_within=self.behaviour.resume_within, revive=revive,
                                              probe_after=self.probe_after))
        membership = SimulatedMembership(client, pool_id, self.delay, self.refused, self.behaviour.seed)
        self.memberships.append(membership)
        self.relays.append(relay.pid)
        return LaunchedCluster(nodes, infos, client, encode, NoCollections(), stop, membership=membership)


def _line_within(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``process`` prints, or "" if it prints none within ``timeout``."""
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline().strip()


if __name__ == "__main__":
    if sys.argv[1] == "--agents":
        host_agents(int(sys.argv[2]), int(sys.argv[3]), Behaviour(**json.loads(sys.argv[4])))
    else:
        serve(sys.argv[1], int(sys.argv[2]), Behaviour(**json.loads(sys.argv[3])))
