"""The head relay: a Ray driver on node 0 of a remote pool that the client reaches
through one SSH-forwarded port (``python -m skyward.providers.ssh.head_relay POOL_DIR``).

Started over SSH with the Ray token as the first line of stdin (read by the shell, never
on a command line), then the length-prefixed ``RelayConfig``. It joins the node's Ray
cluster, starts one ``NodeAgent`` per node (pinned by its host's ``skyward-node-<serial>``
resource), then listens on 127.0.0.1 only and serves one client connection at a time
with the protocol of ``engine.transports.relay``: each call's payload goes to its node's
agent as the bytes it arrived as, each reply and each event batch goes back as the bytes
the agent made. Calls reach the agents over lanes (see ``engine.transports.lane``): the
agent on the relay's own host over a Unix socket in a private temp directory, the others
over TCP proven with a secret of this relay's; Ray actor calls carry the rest. It never
unpickles a user object: scheduling, timeouts and errors are the client's driver's
business. It starts the agent of a node that joins ("attach") and kills that of a node
that left ("detach"); when an agent died, its successor on the same host reads the note
it left (``NodeAgent.postmortem``), so the client learns whether the task ended it. When
the client closes the connection (or it breaks) the relay stops the agents, frees what
the client held in the collections and exits; the node's watchdog stops it too if the
client vanished.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pickle
import secrets
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray

from skyward.engine.transport import NodeLost, NoReply, Shared, TransportError
from skyward.engine.transports.lane import TCP, lane_path
from skyward.engine.transports.ray_actors import RayEventSource, RayTransport
from skyward.engine.transports.relay import receive_message, send_message
from skyward.node.agent import AgentSetup, start_agents, stop_agents, wait_ready
from skyward.node.death import Death

POSTMORTEM_WAIT = 5.0
"""How long the relay waits for a dead agent's successor to say why it died."""
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


def placement(serial: int) -> dict[str, Any]:
    """The Ray actor options that pin an agent to the host of ``serial``."""
    return {"resources": {f"skyward-node-{serial}": 1}}


def failure_kind(error: TransportError) -> str:
    """The "failed" kind of ``error`` on the relay protocol."""
    if isinstance(error, NodeLost):
        return "crashed" if error.by_task else "lost"
    return "no_reply" if isinstance(error, NoReply) else "refused"


class _Outgoing:
    """The single ordered stream of messages to the client, fed from any thread."""

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop) -> None:
        self._writer = writer
        self._loop = loop
        self._queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._pump())

    def put(self, message: tuple[Any, ...]) -> None:
        """Queue ``message`` (on the relay's loop)."""
        self._queue.put_nowait(message)

    def put_threadsafe(self, message: tuple[Any, ...]) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, message)

    async def _pump(self) -> None:
        while (message := await self._queue.get()) is not None:
            try:
                await send_message(self._writer, message)
            except (ConnectionError, OSError):
                return

    async def close(self) -> None:
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(self._task, 10)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass


class HeadRelay:
    """Owns the Ray side of the remote pool and relays one client connection at a time."""

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.agents: dict[int, Any] = {}
        self.lanes: dict[int, str] = {}
        """The lane address of each node whose agent has one."""
        self._lanes_dir = tempfile.mkdtemp(prefix="skyward-lanes-")  # mode 0700: this user only
        self._lane_secret = secrets.token_bytes(32)
        self._lane_slots = 0
        self._closed = asyncio.Event()
        self._clients = 0

    def start(self) -> None:
        """Join Ray, start the agents, wait until every agent answers."""
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
        self.agents = {setup.info.node: agent for setup, agent in zip(setups, agents)}
        wait_ready(agents, config.ready_timeout, "of the pool", "check the hosts' resources and the head's log")
        self._learn_lanes(self.agents)

    def postmortem(self, node: int) -> Death | None:
        """Why node ``node``'s agent died, as its successor on the same host reads it
        (None when it cannot say in time: its host may be gone)."""
        agent = self.agents.get(node)
        if agent is None:
            return None
        try:
            return ray.get(agent.postmortem.remote(), timeout=POSTMORTEM_WAIT)  # type: ignore[no-any-return]
        except Exception:
            return None

    def attach(self, node: int, serial: int, setup: bytes) -> Any:
        """Start node ``node``'s agent on the host of ``serial``; returns it once it answers."""
        agents = start_agents([self._laned(pickle.loads(setup), serial)], [placement(serial)])
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
        self._lane_slots += setup.worker.slots
        if serial != HEAD_SERIAL:
            return dataclasses.replace(setup, lane=TCP, lane_secret=self._lane_secret)
        path = lane_path(self._lanes_dir, "relay", setup.info.node)
        return dataclasses.replace(setup, lane=path) if path else setup

    def _learn_lanes(self, agents: dict[int, Any]) -> None:
        """Ask ``agents`` (started, answering) where their lanes listen."""
        nodes = list(agents)
        addresses = ray.get([agents[node].lane_address.remote() for node in nodes], timeout=self.config.ready_timeout)
        for node, address in zip(nodes, addresses):
            if address:
                self.lanes[node] = address

    def remove_lanes(self) -> None:
        """Remove the lanes' directory (the relay is exiting)."""
        shutil.rmtree(self._lanes_dir, ignore_errors=True)

    def detach(self, node: int) -> None:
        """Kill node ``node``'s agent (the node left the pool)."""
        self.lanes.pop(node, None)
        agent = self.agents.pop(node, None)
        if agent is not None:
            stop_agents([agent])

    async def serve(self) -> None:
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        print(f"::listening {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await self._closed.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        self._clients += 1
        client = f"{os.getpid()}-{self._clients}"
        out = _Outgoing(writer, loop)
        transport = RayTransport(
            [], lane_threads=self._lane_slots, postmortem=self.postmortem, lane_secret=self._lane_secret
        )
        for node, agent in self.agents.items():
            transport.attach(node, agent, self.lanes.get(node, ""))
        listening = threading.Event()  # the client listens for metrics (it says so at once)
        listening.set()
        events = RayEventSource(
            self.agents,
            lambda node, data: out.put_threadsafe(("events", node, data)),
            lambda message: out.put_threadsafe(("report", message)),
            listening.is_set,
        )
        shared: dict[int, Shared] = {}
        tasks: dict[int, asyncio.Task[None]] = {}
        try:
            while (message := await receive_message(reader)) is not None:
                kind = message[0]
                if kind == "close":
                    break
                if kind == "call":
                    _, call_id, node, body, timeout = message
                    payload = shared[body[1]] if isinstance(body, tuple) and body[0] == "shared" else body
                    tasks[call_id] = asyncio.ensure_future(self._call(transport, out, call_id, node, payload, timeout))
                    tasks[call_id].add_done_callback(lambda _, i=call_id: tasks.pop(i, None))
                elif kind == "share":
                    shared[message[1]] = await transport.share(message[2])
                elif kind == "unshare":
                    shared.pop(message[1], None)
                elif kind == "forget":
                    task = tasks.pop(message[1], None)
                    if task is not None:
                        task.cancel()
                    self.agents[0].cancel_collection.remote(client, message[1])
                elif kind == "collection":
                    _, call_id, request = message
                    tasks[call_id] = asyncio.ensure_future(self._collection(out, client, call_id, request))
                    tasks[call_id].add_done_callback(lambda _, i=call_id: tasks.pop(i, None))
                elif kind == "attach":
                    _, call_id, node, serial, setup = message
                    tasks[call_id] = asyncio.ensure_future(self._attach(transport, events, out, call_id, node, serial, setup))
                    tasks[call_id].add_done_callback(lambda _, i=call_id: tasks.pop(i, None))
                elif kind == "metrics":
                    (listening.set if message[1] else listening.clear)()
                elif kind == "detach":
                    _, node, reason = message
                    transport.detach(node, reason)
                    events.remove(node)
                    loop.run_in_executor(None, self.detach, node)
        finally:
            for task in list(tasks.values()):
                task.cancel()
            await loop.run_in_executor(None, self._end_client, client, events, transport)
            out.put(("closed",))
            await out.close()
            writer.close()
            self._closed.set()

    async def _call(
        self, transport: RayTransport, out: _Outgoing, call_id: int, node: int, payload: Any, timeout: float | None
    ) -> None:
        try:
            out.put(("reply", call_id, await transport.call(node, payload, timeout)))
        except TransportError as exc:
            out.put(("failed", call_id, failure_kind(exc), node, exc.detail))

    async def _attach(
        self, transport: RayTransport, events: RayEventSource, out: _Outgoing, call_id: int, node: int, serial: int,
        setup: bytes,
    ) -> None:
        try:
            agent = await asyncio.get_running_loop().run_in_executor(None, self.attach, node, serial, setup)
        except Exception as exc:
            out.put(("attached", call_id, f"{type(exc).__name__}: {exc}"))
            return
        transport.attach(node, agent, self.lanes.get(node, ""))
        events.add(node, agent)
        out.put(("attached", call_id, None))

    async def _collection(self, out: _Outgoing, client: str, call_id: int, request: bytes) -> None:
        ref = self.agents[0].collection.remote(client, call_id, request)
        try:
            answer = await asyncio.wrap_future(ref.future())
        except Exception as exc:  # the head node's agent died: the operation failed
            answer = pickle.dumps((False, ConnectionError(f"the head node's agent is gone: {exc}")))
        out.put(("collection", call_id, answer))

    def _end_client(self, client: str, events: RayEventSource, transport: RayTransport) -> None:
        """The client is gone: free what it held, pass on the last events, stop the agents."""
        try:
            ray.get(self.agents[0].end_client.remote(client), timeout=15)
        except Exception:
            pass
        events.stop()
        transport.close()
        stop_agents(list(self.agents.values()))


def main() -> None:
    size = int.from_bytes(sys.stdin.buffer.read(8), "big")
    config: RelayConfig = pickle.loads(sys.stdin.buffer.read(size))
    relay = HeadRelay(config)
    started = time.monotonic()
    try:
        try:
            relay.start()
        except BaseException as exc:
            print(f"::error {type(exc).__name__}: {exc}", flush=True)
            raise SystemExit(1) from None
        print(f"::agents {time.monotonic() - started:.3f}", flush=True)
        asyncio.run(relay.serve())
        ray.shutdown()
    finally:
        relay.remove_lanes()


if __name__ == "__main__":
    main()
