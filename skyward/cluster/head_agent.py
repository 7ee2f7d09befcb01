"""The head agent: a Ray driver on node 0 of a remote cluster that serves the client.

Started over SSH with the Ray token in its environment (read from stdin by the shell,
never on a command line) and a framed ``HeadConfig`` on stdin. It joins the node's Ray cluster, starts one
``NodeAgent`` per node (pinned by the node's ``skyward-node-<i>`` resource), then
listens on 127.0.0.1 only: the client reaches it through an SSH port forward. Requests
run through the same ``ClusterDriver`` a local pool uses; collection operations from
the client (``pool.dict(...)`` & co.) run with the head agent's own collections engine
(``remote_collections``), each concurrently; results and events (task
output, metrics, task events) go back on the one stream, events before the result they
precede. It exits when the client sends "close" (or when the node's keeper stops it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from skyward.cluster import remote_protocol as protocol
from skyward.cluster.agent import AgentSetup, NodeAgent
from skyward.cluster.driver import ClusterDriver
from skyward.cluster.event_poller import EventPoller
from skyward.cluster.remote_collections import CollectionServer
from skyward.cluster.wire import RaisedError
from skyward.observe.events import Error
from skyward.spec import Worker

SPARE_CONCURRENCY = 40
EVENT_BATCH = 500


@dataclass
class HeadConfig:
    """What the head agent needs: the Ray address and token, one setup per node."""

    gcs_address: str
    node_ip: str
    setups: list[AgentSetup]
    worker: Worker
    default_timeout: float
    ready_timeout: float
    ray_env: dict[str, str] = field(default_factory=dict)
    """Extra environment for the driver (the token is already in its environment)."""


class _Outgoing:
    """The single ordered stream of messages to the client (events batched)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._pump())

    def event(self, event: Any) -> None:
        self._queue.put_nowait(("event", event))

    def message(self, message: Any) -> None:
        self._queue.put_nowait(("message", message))

    async def _pump(self) -> None:
        while True:
            kind, item = await self._queue.get()
            if kind == "event":
                events = [item]
                while not self._queue.empty() and len(events) < EVENT_BATCH:
                    next_kind, next_item = self._queue.get_nowait()
                    if next_kind != "event":
                        await self._send(("events", events))
                        events = []
                        await self._send(next_item)
                        break
                    events.append(next_item)
                if events:
                    await self._send(("events", events))
            else:
                await self._send(item)

    async def _send(self, message: Any) -> None:
        try:
            data = protocol.dumps(message)
        except Exception as exc:  # an unpicklable exception or event
            if message[0] == "result":
                data = protocol.dumps(("result", message[1], False, RuntimeError(f"{message[3]!r} ({exc})")))
            else:
                return
        await protocol.send(self._writer, data)

    async def close(self) -> None:
        while not self._queue.empty():
            await asyncio.sleep(0.01)
        self._task.cancel()


class HeadAgent:
    """Owns the Ray side of the remote cluster and answers one client connection."""

    def __init__(self, config: HeadConfig) -> None:
        self.config = config
        self.agents: list[Any] = []
        self._wants: frozenset[type] = frozenset()
        self._tasks: dict[int, asyncio.Task[Any]] = {}
        self._closed = asyncio.Event()

    def start(self) -> None:
        """Join Ray, start the agents, wait until every agent answers."""
        config = self.config
        os.environ.update(config.ray_env)
        for name in ("ray", "ray._private", "ray._raylet"):
            logging.getLogger(name).setLevel(logging.ERROR)
        ray.init(
            address=config.gcs_address,
            _node_ip_address=config.node_ip,
            namespace="skyward",
            log_to_driver=False,
            logging_level=logging.ERROR,
        )
        remote_agent = ray.remote(
            num_cpus=0, max_restarts=-1, max_task_retries=0,
            max_concurrency=config.worker.slots + SPARE_CONCURRENCY,
        )(NodeAgent)
        self.agents = [
            remote_agent.options(resources={f"skyward-node-{setup.info.node}": 1}).remote(setup)
            for setup in config.setups
        ]
        refs = [agent.ready.remote() for agent in self.agents]
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=config.ready_timeout)
        if pending:
            raise TimeoutError(f"{len(pending)} of {len(refs)} node agents did not start within {config.ready_timeout:g}s")
        ray.get(ready)

    async def serve(self) -> None:
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        print(f"::listening {port}", flush=True)
        async with server:
            await self._closed.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        out = _Outgoing(writer)
        poller = EventPoller(
            self.agents, lambda e: loop.call_soon_threadsafe(out.event, e), lambda m: loop.call_soon_threadsafe(out.event, Error(m))
        )
        config = self.config
        collections = CollectionServer(config.setups[0].collections if config.setups else None)
        driver = ClusterDriver(
            self.agents, config.worker, config.default_timeout,
            out.event, lambda kind: kind in self._wants, poller.wait_delivered, loop,
        )
        try:
            while True:
                message = await protocol.receive(reader)
                if message is None or message[0] == "close":
                    break
                if message[0] == "cancel":
                    task = self._tasks.get(message[1])
                    if task is not None:
                        task.cancel()
                    continue
                self._tasks[message[1]] = asyncio.ensure_future(self._handle(driver, collections, out, message))
        finally:
            driver.closing = True
            for task in list(self._tasks.values()):
                task.cancel()
            await collections.close()
            await loop.run_in_executor(None, poller.stop)
            await self._shutdown_agents()
            await out.close()
            try:
                await protocol.send(writer, protocol.dumps(("closed",)))
                writer.close()
            except (ConnectionError, OSError):
                pass
            self._closed.set()

    async def _handle(
        self, driver: ClusterDriver, collections: CollectionServer, out: _Outgoing, message: tuple[Any, ...]
    ) -> None:
        kind, request_id = message[0], message[1]
        self._wants = message[-1]
        try:
            if kind == "collection":
                value = await collections.handle(request_id, message[2], message[3])
            elif kind == "run":
                value = await driver.run(message[2], message[3])
            elif kind == "broadcast":
                value = await driver.broadcast(message[2])
            else:
                value = await driver.map(message[2], message[3])
            out.message(("result", request_id, True, value))
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            out.message(("result", request_id, False, RaisedError.from_exception(exc)))
        finally:
            self._tasks.pop(request_id, None)

    async def _shutdown_agents(self) -> None:
        def stop() -> None:
            refs = [agent.shutdown.remote() for agent in self.agents]
            ray.wait(refs, num_returns=len(refs), timeout=5)
            for actor in self.agents:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass

        await asyncio.get_running_loop().run_in_executor(None, stop)


def main() -> None:
    raw = sys.stdin.buffer.read(protocol.HEADER.size)
    (size,) = protocol.HEADER.unpack(raw)
    config: HeadConfig = protocol.cloudpickle.loads(sys.stdin.buffer.read(size))
    head = HeadAgent(config)
    started = time.monotonic()
    try:
        head.start()
    except BaseException as exc:
        print(f"::error {type(exc).__name__}: {exc}", flush=True)
        raise SystemExit(1) from None
    print(f"::agents {time.monotonic() - started:.3f}", flush=True)
    asyncio.run(head.serve())
    ray.shutdown()

