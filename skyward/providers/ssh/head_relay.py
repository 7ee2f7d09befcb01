"""The head relay: a Ray driver on node 0 of a remote pool that the client reaches
through a channel of its SSH connection (``python -m skyward.providers.ssh.head_relay POOL_DIR``).

Started over SSH with the Ray token as the first line of stdin (read by the shell, never
on a command line) while Ray starts on the hosts, so its imports are done by the time the
length-prefixed ``RelayConfig`` (with the secret the client will prove) follows once Ray
is up; it exits if stdin ends first (the pool's open failed). It joins the node's Ray
cluster, starts one ``NodeAgent`` per node (pinned by its host's
``skyward-node-<serial>`` resource), then listens on 127.0.0.1 only and
serves the one client that proves the secret (``engine.relay_server``, the messages of
``core.messages``; a stranger on the port is hung up on): each call's payload goes to its node's
agent as the bytes it arrived as, each reply and each event batch goes back as the bytes
the agent made. Calls reach the agents over lanes (see ``engine.transports.lane``): the
agent on the relay's own host over a Unix socket in a private temp directory, the others
over TCP proven with a secret of this relay's; Ray actor calls carry the rest. It never
unpickles a user object: scheduling, timeouts and errors are the client's driver's
business. It starts the agent of a node that joins ("attach") and kills that of a node
that left ("detach"); when an agent died, its successor on the same host reads the note
it left (``NodeAgent.postmortem``), so the client learns whether the task ended it. When
the client closes the connection (or it breaks and the client does not resume its session
on a new one within ``RelayConfig.resume_within``) the relay stops the agents, frees what
the client held in the collections and exits; the node's watchdog stops it too if the
client vanished. A kept pool's relay (``RelayConfig.kept``: its client is the pool
daemon) outlives its client instead: its agents keep running and it serves the next
client that proves the secret (the daemon's successor, if the daemon died), until the
node's watchdog ends it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import ray

from skyward.collections import installed as collections_installed
from skyward.collections.gateway import encode_answer
from skyward.core import handshake, messages
from skyward.core.codec import load_payload, marker
from skyward.core.open_files import raise_open_files
from skyward.engine.death import Death
from skyward.engine.relay_server import RelayServer, Sink, TransportBackend
from skyward.engine.transports.lane import TCP, lane_path
from skyward.engine.transports.ray_actors import AgentHandle, RayAgent, RayEventSource, RayTransport, RemoteMethod
from skyward.engine.transports.upload_lane import Credentials, UploadListener, Uploads
from skyward.node.agent import AgentSetup, start_agents, stop_agents, wait_ready
from skyward.providers.ssh.watchdog import POOL_ENV

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent

POSTMORTEM_WAIT = 5.0
"""How long the relay waits for a dead agent's successor to say why it died."""
JOIN_POLL = 0.05
"""Seconds between the relay's looks at which hosts have joined Ray (``_joined``)."""
HEAD_SERIAL = 0
"""The host the relay runs on: its agents' lanes are Unix sockets, the others' TCP."""


@dataclass(frozen=True, slots=True)
class RelayConfig:
    """What the relay needs: the Ray address to join and one agent setup per node (the
    agent of node ``i`` is pinned to the host with resource ``skyward-node-<i>``)."""

    gcs_address: str
    node_ip: str
    setups: tuple[AgentSetup, ...]
    ready_timeout: float
    secret: bytes
    """What the client proves before the relay reads its first frame (``core.handshake``)."""
    compress: bool = True
    """Whether large messages to the client travel compressed where that pays (lz4:
    ``codec.relay_frame``, docs/benchmarks.md's payload compression)."""
    kept: bool = False
    """Whether the pool outlives its client (a kept pool: see the module)."""
    resume_within: float = 0.0
    """Seconds the client's session is kept when its stream breaks, for the client to
    resume it over a new one (``RelayServer``; 0: none). A kept pool's is ended sooner
    by the next client's session (a process that took the pool over)."""
    joining: float = 0.0
    """Seconds the other hosts may still take to join Ray when the relay starts (it is
    configured once the head's Ray answers): its wait of ``ready_timeout`` for the first
    agents begins once every host has joined, or this long after it started."""
    upload: Credentials | None = None
    """The key and certificate of the relay's upload lane, which listens on ``node_ip``
    (``engine.transports.upload_lane``); None: no lane."""


def placement(serial: int) -> dict[str, object]:
    """The Ray actor options that pin an agent to the host of ``serial``."""
    return {"resources": {host_resource(serial): 1}}


def host_resource(serial: int) -> str:
    """The Ray resource only the host of ``serial`` has."""
    return f"skyward-node-{serial}"


def _joined(serials: list[int], within: float) -> None:
    """Wait until the host of every one of ``serials`` is in Ray (its resource is), or
    ``within`` seconds have passed: then its agent is placed, and what follows waits for
    the agent alone."""
    deadline = time.monotonic() + within
    wanted = {host_resource(serial) for serial in serials}
    while not wanted <= set(ray.cluster_resources()) and time.monotonic() < deadline:
        time.sleep(JOIN_POLL)


class RelayAgent(AgentHandle, Protocol):
    """A node agent's Ray actor (``node.agent.NodeAgent``) as a relay calls it: what its
    client calls, and the collections and post-mortems the relay serves."""

    @property
    def postmortem(self) -> RemoteMethod[[], Death | None]: ...

    @property
    def collection(self) -> RemoteMethod[[str, int, bytes], bytes]: ...

    @property
    def cancel_collection(self) -> RemoteMethod[[str, int], None]: ...

    @property
    def end_client(self) -> RemoteMethod[[str], None]: ...


def relayed(agent: ActorHandle[NodeAgent]) -> RelayAgent:
    """``agent`` with the methods a relay calls typed (Ray types a handle's methods as
    ``Never``, which would hide every mistake in a call)."""
    return agent


class RelayedAgents(Protocol):
    """The agents a relay serves its client with: a remote pool's (``HeadRelay``), or a
    kept pool's in the pool daemon (``daemon.kept_pool.LocalKeptPool``)."""

    agents: dict[int, ActorHandle[NodeAgent]]
    lanes: dict[int, str]
    lane_secret: bytes
    ends_with_client: bool
    """Whether a client's leaving stops the agents (a kept pool's outlive it)."""

    def postmortem(self, node: int) -> Death | None: ...

    def start_agent(self, node: int, serial: int, setup: bytes) -> ActorHandle[NodeAgent]: ...

    def stop_agent(self, node: int) -> None: ...


class HeadRelay:
    """Owns the Ray side of the remote pool and relays its one client."""

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.ends_with_client = not config.kept
        self.agents: dict[int, ActorHandle[NodeAgent]] = {}
        self.lanes: dict[int, str] = {}
        """The lane address of each node whose agent has one."""
        # mode 0700: this user only; in the pool's directory, which the watchdog removes
        # (a kept pool's relay ends only when the watchdog stops it)
        self._lanes_dir = tempfile.mkdtemp(prefix="lanes-", dir=os.environ.get(POOL_ENV) or None)
        self.lane_secret = handshake.new_secret()
        self._clients = 0

    def start(self) -> None:
        """Join Ray, start the agents and the collections' hosts, wait until every agent answers."""
        config = self.config
        for name in ("ray", "ray._private", "ray._raylet"):
            logging.getLogger(name).setLevel(logging.ERROR)
        ray.init(
            address=config.gcs_address,
            _node_ip_address=config.node_ip,
            namespace="skyward",
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
        setups = [self._laned(setup, setup.info.node) for setup in config.setups]
        agents = start_agents(setups, [placement(setup.info.node) for setup in setups])
        if setups and setups[0].collections is not None:  # on the head, beside the agents
            collections_installed.start_hosts_if_enabled(setups[0].collections, detached=True)
        self.agents = {setup.info.node: agent for setup, agent in zip(setups, agents)}
        _joined([setup.info.node for setup in setups], config.joining)
        wait_ready(agents, config.ready_timeout, "of the pool", "check the hosts' resources and the head's log")
        self._learn_lanes(self.agents)

    def postmortem(self, node: int) -> Death | None:
        """Why node ``node``'s agent died, as its successor on the same host reads it
        (None when it cannot say in time: its host may be gone)."""
        agent = self.agents.get(node)
        if agent is None:
            return None
        try:
            return ray.get(relayed(agent).postmortem.remote(), timeout=POSTMORTEM_WAIT)
        except Exception:
            return None

    def start_agent(self, node: int, serial: int, setup: bytes) -> ActorHandle[NodeAgent]:
        """Start node ``node``'s agent on the host of ``serial``; returns it once it answers."""
        agents = start_agents([self._laned(load_payload(setup), serial)], [placement(serial)])
        try:
            wait_ready(agents, self.config.ready_timeout, f"of node {node}", "check the host's Ray and the head's log")
        except BaseException:
            stop_agents(agents)
            raise
        self.agents[node] = agents[0]
        self._learn_lanes({node: agents[0]})
        return agents[0]

    def _laned(self, setup: AgentSetup, serial: int) -> AgentSetup:
        """``setup`` with a lane (a socket round trip instead of a Ray actor call): a
        Unix socket when its agent runs on the relay's host, else TCP on its host."""
        if serial != HEAD_SERIAL:
            return dataclasses.replace(setup, lane=TCP, lane_secret=self.lane_secret)
        path = lane_path(self._lanes_dir, "relay", setup.info.node)
        return dataclasses.replace(setup, lane=path) if path else setup

    def _learn_lanes(self, agents: dict[int, ActorHandle[NodeAgent]]) -> None:
        """Ask ``agents`` (started, answering) where their lanes listen."""
        nodes = list(agents)
        addresses = ray.get([relayed(agents[node]).lane_address.remote() for node in nodes], timeout=self.config.ready_timeout)
        for node, address in zip(nodes, addresses):
            if address:
                self.lanes[node] = address

    def remove_lanes(self) -> None:
        """Remove the lanes' directory (the relay is exiting)."""
        shutil.rmtree(self._lanes_dir, ignore_errors=True)

    def stop_agent(self, node: int) -> None:
        """Kill node ``node``'s agent (the node left the pool)."""
        self.lanes.pop(node, None)
        agent = self.agents.pop(node, None)
        if agent is not None:
            stop_agents([agent])

    async def serve(self) -> None:
        """Listen on 127.0.0.1 (reached over a channel of the client's SSH connection), and
        for uploads on the host's address (``_upload_lane``), and serve the client that
        proves the pool's secret; return once it is gone (a kept
        pool's relay serves the next one instead, and never returns)."""
        uploads = Uploads()
        server = RelayServer(
            self.config.secret, self._session, self.config.compress, successive=self.config.kept,
            resume_within=self.config.resume_within, uploads=uploads,
        )
        lane = self._upload_lane(uploads)
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        if lane is not None:
            print(marker(messages.UploadListening(lane.port)), flush=True)
        print(marker(messages.RelayListening(listener.sockets[0].getsockname()[1])), flush=True)
        try:
            async with listener:
                await server.finished.wait()
        finally:
            if lane is not None:
                lane.close()

    def _upload_lane(self, uploads: Uploads) -> UploadListener | None:
        """The upload lane listening on this host's address on the pool's network, where
        the config asks for one and it can listen (else the client uploads over SSH)."""
        config = self.config
        if config.upload is None:
            return None
        try:
            return UploadListener(config.node_ip, config.upload, config.secret, uploads)
        except (OSError, ValueError) as exc:
            print(f"skyward head relay: no upload lane on {config.node_ip}: {exc}", flush=True)
            return None

    def _session(self, sink: Sink) -> RayAgentsBackend:
        self._clients += 1
        return RayAgentsBackend(self, f"{os.getpid()}-{self._clients}", sink)


class RayAgentsBackend(TransportBackend):
    """The relay's backend for its client: the agents as Ray actors and lanes."""

    _transport: RayTransport

    def __init__(self, relay: RelayedAgents, client: str, sink: Sink) -> None:
        self._relay = relay
        self._client = client
        self._loop = asyncio.get_running_loop()
        self._transport = RayTransport(
            [], postmortem=relay.postmortem, lane_secret=relay.lane_secret, share_by_lanes=True
        )
        for node, agent in relay.agents.items():
            self._transport.attach(node, RayAgent(agent, relay.lanes.get(node, "")))
        self._listening = threading.Event()  # the client says at once whether it listens for metrics
        self._listening.set()
        self._events = RayEventSource(relay.agents, sink.events, sink.report, self._listening.is_set)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        ref = relayed(self._relay.agents[0]).collection.remote(self._client, call_id, request)
        try:
            return await asyncio.wrap_future(ref.future())
        except Exception as exc:  # the head node's agent died: the operation failed
            return encode_answer(False, ConnectionError(f"the head node's agent is gone: {exc}"))

    def forget_collection(self, call_id: int) -> None:
        relayed(self._relay.agents[0]).cancel_collection.remote(self._client, call_id)

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        agent = await self._loop.run_in_executor(None, self._relay.start_agent, node, serial, setup)
        self._transport.attach(node, RayAgent(agent, self._relay.lanes.get(node, "")))
        self._events.add(node, agent)
        return b""  # the client placed it

    def detach(self, node: int, reason: str) -> None:
        self._transport.detach(node, reason)
        self._events.remove(node)
        self._loop.run_in_executor(None, self._relay.stop_agent, node)

    def set_metrics(self, on: bool) -> None:
        (self._listening.set if on else self._listening.clear)()

    def release_holds(self) -> None:
        try:
            ray.get(relayed(self._relay.agents[0]).end_client.remote(self._client), timeout=15)
        except Exception:
            pass

    def end(self) -> None:
        self.release_holds()
        self._events.stop()
        self._transport.close()
        if self._relay.ends_with_client:
            stop_agents(list(self._relay.agents.values()))


def main() -> None:
    raise_open_files()  # a lane per node: a big pool needs more than a session's 1,024
    header = sys.stdin.buffer.read(8)  # booted while Ray starts: the config comes once Ray is up
    if len(header) < 8:
        raise SystemExit("skyward head relay: stdin ended before its config came (the pool's open failed)")
    size = int.from_bytes(header, "big")
    config: RelayConfig = load_payload(sys.stdin.buffer.read(size))  # from the client, over SSH
    if config.kept or config.resume_within:  # its client's SSH connection may end before it does
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    relay = HeadRelay(config)
    started = time.monotonic()
    try:
        try:
            relay.start()
        except BaseException as exc:
            print(marker(messages.RelayFailed(f"{type(exc).__name__}: {exc}")), flush=True)
            raise SystemExit(1) from None
        print(marker(messages.AgentsStarted(round(time.monotonic() - started, 3))), flush=True)
        signal.signal(signal.SIGTERM, lambda signum, _frame: _end_now(relay, signum))  # in Ray's handler's place
        asyncio.run(relay.serve())
        ray.shutdown()
    finally:
        relay.remove_lanes()


def _end_now(relay: HeadRelay, signum: int) -> None:
    """End the relay at once: a SIGTERM comes from the watchdog stopping the pool on this
    host, every process of it at the same moment, so there is nothing to say goodbye to.
    Ray's own handler raised SystemExit, even in the middle of the relay's
    ``ray.shutdown()`` once its client had left, and Ray's exit hook then slept 0.5 s
    before shutting the driver down again: most of a pool's close."""
    relay.remove_lanes()
    os._exit(128 + signum)


if __name__ == "__main__":
    main()
