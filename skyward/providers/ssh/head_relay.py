"""The head relay: a Ray driver on node 0 of a remote pool that the client reaches
through one SSH-forwarded port (``python -m skyward.providers.ssh.head_relay POOL_DIR``).

Started over SSH with the Ray token as the first line of stdin (read by the shell, never
on a command line), then the length-prefixed ``RelayConfig``. It joins the node's Ray
cluster, starts one ``NodeAgent`` per node (pinned by the node's ``skyward-node-<i>``
resource), then listens on 127.0.0.1 only and serves one client connection at a time
with the protocol of ``engine.transports.relay``: each call's payload goes to its node's
agent as the bytes it arrived as, each reply and each event batch goes back as the bytes
the agent made. It never unpickles a user object: scheduling, timeouts and errors are
the client's driver's business. When the client closes the connection (or it breaks)
the relay stops the agents, frees what the client held in the collections and exits;
the node's watchdog stops it too if the client vanished.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import sys
import time
from dataclasses import dataclass
from typing import Any

import ray

from skyward.engine.transport import NodeLost, NoReply, Shared, TransportError
from skyward.engine.transports.ray_actors import RayEventSource, RayTransport
from skyward.engine.transports.relay import receive_message, send_message
from skyward.node.agent import AgentSetup, start_agents, stop_agents, wait_ready

_FAILURE_KINDS = {NodeLost: "lost", NoReply: "no_reply"}


@dataclass(frozen=True, slots=True)
class RelayConfig:
    """What the relay needs: the Ray address to join and one agent setup per node."""

    gcs_address: str
    node_ip: str
    setups: tuple[AgentSetup, ...]
    ready_timeout: float


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
        self.agents: list[Any] = []
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
        placement = [{"resources": {f"skyward-node-{setup.info.node}": 1}} for setup in config.setups]
        self.agents = start_agents(config.setups, placement)
        wait_ready(self.agents, config.ready_timeout, "of the pool", "check the hosts' resources and the head's log")

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
        transport = RayTransport(self.agents)
        events = RayEventSource(
            self.agents,
            lambda node, data: out.put_threadsafe(("events", node, data)),
            lambda message: out.put_threadsafe(("report", message)),
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
            out.put(("failed", call_id, _FAILURE_KINDS.get(type(exc), "refused"), node, exc.detail))

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
        stop_agents(self.agents)


def main() -> None:
    size = int.from_bytes(sys.stdin.buffer.read(8), "big")
    config: RelayConfig = pickle.loads(sys.stdin.buffer.read(size))
    relay = HeadRelay(config)
    started = time.monotonic()
    try:
        relay.start()
    except BaseException as exc:
        print(f"::error {type(exc).__name__}: {exc}", flush=True)
        raise SystemExit(1) from None
    print(f"::agents {time.monotonic() - started:.3f}", flush=True)
    asyncio.run(relay.serve())
    ray.shutdown()


if __name__ == "__main__":
    main()
