"""An in-process cluster for the engine's tests: ``FakeTransport`` runs each node's tasks
with the same ``NodeRunner`` a node agent uses, on threads of the test process, so the
driver's scheduling, timeouts, error mapping and event ordering run without Ray (the
role httpx's MockTransport plays for httpx).

Faults are scripted per node: ``fail_next(node, error)`` makes the next call to that
node raise a ``TransportError`` after it reached the node; ``hold(node)`` makes calls to
it wait until ``release(node)``. ``FakeProvider`` turns it into a pool
(``sky.Compute(provider=FakeProvider(), nodes=4)``), used by ``pytest --provider fake``;
its clusters have a ``FakeMembership`` (nodes join after ``join_delay`` seconds, and
``lose(node)`` plays a node lost to the infrastructure). Its pools have no distributed
collections, metrics or process executor.

``FakeProvider(relayed=True)`` puts the head relay's server between the pool and the fake
nodes, as on a remote pool: the client's ``RelayTransport`` speaks the relay protocol over
a Unix socket to a ``RelayServer`` (on a loop thread of its own) whose backend,
``TransportBackend``, is the ``FakeTransport``. ``relay_address``/``relay_secret`` of the
provider's ``relays`` record say where it listens, for tests that knock on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import skyward as sky
from skyward.core import handshake
from skyward.core.instance import InstanceInfo, NetworkInfo, PeerInfo, current_task
from skyward.core.output import TaskStream
from skyward.engine import publish
from skyward.engine.events import EventBatch, EventFeed
from skyward.engine.membership import NO_FLOOR, Floor, Joined, Loss
from skyward.engine.relay_server import RelayServer, Sink
from skyward.engine.transport import NodeLost, NoReply, Shared, TransportError
from skyward.engine.transports.relay import RelayEndpoint, RelayTransport
from skyward.engine.wire import Payload, encode
from skyward.model.nodes import NodeHandle
from skyward.node.agent import AgentSetup, NodeRunner
from skyward.providers.base import LaunchedCluster, Offer

POLL_WAIT = 0.05


class FakeTransport:
    """Calls in-process ``NodeRunner``s; ``runners[i]`` is node ``i``."""

    def __init__(self, runners: list[NodeRunner] | dict[int, NodeRunner], threads: int) -> None:
        self.runners: dict[int, NodeRunner] = dict(enumerate(runners)) if isinstance(runners, list) else runners
        self._threads = ThreadPoolExecutor(threads, "fake-node")
        self._faults: dict[int, TransportError] = {}
        self._gates: dict[int, threading.Event] = {}
        self._gone: dict[int, asyncio.Future[str]] = {}
        self._left: dict[int, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keys = itertools.count()
        self._stop = threading.Event()
        self._events: threading.Thread | None = None
        self.calls: list[int] = []

    @property
    def can_call_now(self) -> bool:
        return True

    def fail_next(self, node: int, error: TransportError) -> None:
        """The next call to ``node`` runs, then raises ``error``."""
        self._faults[node] = error

    def hold(self, node: int) -> None:
        """Calls to ``node`` wait (up to 30 s) until ``release(node)``."""
        self._gate(node).clear()

    def release(self, node: int) -> None:
        self._gate(node).set()

    def attach(self, node: int, runner: NodeRunner) -> None:
        """Node ``node`` joins with ``runner``."""
        self._left.pop(node, None)
        self.runners[node] = runner

    def detach(self, node: int, reason: str) -> None:
        self._left[node] = reason
        self.runners.pop(node, None)
        gone = self._gone.pop(node, None)
        if gone is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: gone.done() or gone.set_result(reason))

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventFeed) -> None:
        self._loop = loop
        self._events = threading.Thread(target=self._poll, args=(feed,), name="fake-events", daemon=True)
        self._events.start()

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        return self._run(node, payload)

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        body = payload.handle if isinstance(payload, Shared) else payload
        reply = asyncio.get_running_loop().run_in_executor(self._threads, self._run, node, body)
        gone = self._gone.setdefault(node, asyncio.get_running_loop().create_future())
        done, _ = await asyncio.wait({reply, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if reply in done:
            return reply.result()
        if gone in done:
            raise NodeLost(node, gone.result())
        raise NoReply(node, "no answer in time")

    async def share(self, payload: Payload) -> Shared:
        return Shared(next(self._keys), payload)

    def unshare(self, shared: Shared) -> None:
        pass

    def close(self) -> None:
        self._stop.set()
        if self._events is not None:
            self._events.join(5)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _gate(self, node: int) -> threading.Event:
        gate = self._gates.get(node)
        if gate is None:
            gate = self._gates[node] = threading.Event()
            gate.set()
        return gate

    def _run(self, node: int, payload: Payload) -> Payload:
        self.calls.append(node)
        runner = self.runners.get(node)
        if runner is None:
            raise NodeLost(node, self._left.get(node, f"node {node} is not part of the pool"))
        self._gate(node).wait(30)
        reply = runner.execute(payload)
        fault = self._faults.pop(node, None)
        if fault is not None:
            raise fault
        return reply

    def _poll(self, feed: EventFeed) -> None:
        while not self._stop.is_set():
            for node, runner in list(self.runners.items()):
                batch = EventBatch.decode(runner.take_events(0.0))
                if batch.events or batch.dropped:
                    feed.submit(node, batch)
            time.sleep(POLL_WAIT)
        for node, runner in list(self.runners.items()):
            feed.submit(node, EventBatch.decode(runner.take_events(0.0)))


def fake_info(node: int, count: int, pool_id: str = "job") -> InstanceInfo:
    """Node ``node``'s place in a fake pool of ``count`` nodes."""
    peers = [PeerInfo(rank, "127.0.0.1") for rank in range(count)]
    return InstanceInfo(node, 0, count, 1, 0.0, 0.0, "127.0.0.1", 0, pool_id, peers, None, NetworkInfo("lo"))


class FakeMembership:
    """Nodes of a fake cluster join (after ``join_delay`` seconds) and leave; ``lose``
    reports a node lost to the infrastructure, as a cloud's spot interruption would;
    ``capacity`` caps the nodes (None: no cap)."""

    def __init__(
        self, transport: FakeTransport, worker: sky.Worker, pool_id: str, join_delay: float, capacity: int | None,
        on_runner: Callable[[NodeRunner], None],
    ) -> None:
        self.transport = transport
        self.added: list[int] = []
        self.removed: list[int] = []
        self._worker = worker
        self._pool_id = pool_id
        self._join_delay = join_delay
        self._capacity = capacity
        self._on_runner = on_runner
        self._watchers: list[Callable[[Loss], None]] = []
        self._found: list[Loss] = []

    def capacity(self) -> int | None:
        return self._capacity

    def add(self, node: int) -> Joined:
        time.sleep(self._join_delay)
        runner = NodeRunner(AgentSetup(fake_info(node, node + 1, self._pool_id), self._worker, ".", (), {}, (), None))
        self._on_runner(runner)
        self.transport.attach(node, runner)
        self.added.append(node)
        return Joined(NodeHandle(f"{self._pool_id}-{node}-{len(self.added)}", "127.0.0.1", instance_type="fake"), runner.info)

    def lowest(self) -> Floor:
        return NO_FLOOR

    def remove(self, node: int) -> None:
        runner = self.transport.runners.get(node)
        self.transport.detach(node, f"node {node} was removed")
        if runner is not None:
            runner.shutdown()
        self.removed.append(node)

    def watch(self, lost: Callable[[Loss], None]) -> None:
        self._watchers.append(lost)

    def check(self) -> list[Loss]:
        found, self._found = self._found, []
        return found

    def lose(self, node: int, reason: str = "the machine vanished", preempted: bool = True, pushed: bool = True) -> None:
        """Node ``node`` is gone: reported at once (``pushed``) or at the next check."""
        runner = self.transport.runners.get(node)
        if runner is not None:
            runner.shutdown()
        loss = Loss(node, reason, preempted)
        if pushed:
            for watcher in self._watchers:
                watcher(loss)
        else:
            self._found.append(loss)


class NoCollections:
    """The ``ClientCollections`` of a pool without distributed collections (the fake and
    the simulated clusters): every operation is refused."""

    def operations(self) -> Any:
        raise NotImplementedError("this test cluster has no distributed collections")

    def membership_changed(self, left: int | None, reason: str) -> None:
        pass

    def release(self) -> None:
        pass

    def results_arrived(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class FakeProvider:
    """A pool of in-process nodes (see the module docstring)."""

    name: ClassVar[str] = "fake"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()
    join_delay: float = 0.0
    capacity: int | None = None
    relayed: bool = False
    relays: list[FakeRelay] = field(default_factory=list, compare=False, hash=False)

    def validate(self, spec: sky.Spec, options: sky.Options) -> None:
        if options.resolved_worker.resolved_executor != "thread":
            raise NotImplementedError("the fake cluster runs tasks on threads only")
        if spec.volumes:
            raise NotImplementedError("the fake cluster's in-process nodes mount no volumes")

    def offers(self, spec: sky.Spec) -> list[Offer]:
        return []

    def default_storage(self, spec: sky.Spec) -> sky.Storage | None:
        return None

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> LaunchedCluster:
        count = spec.node_count.floor
        worker = options.resolved_worker
        infos = tuple(fake_info(node, count, pool_id) for node in range(count))
        runners = {info.node: NodeRunner(AgentSetup(info, worker, ".", (), {}, (), None)) for info in infos}
        transport = FakeTransport(runners, spec.node_count.ceiling * worker.slots + 4)
        streams = _Output(transport.runners)
        membership = FakeMembership(transport, worker, pool_id, self.join_delay, self.capacity, streams.watch)
        nodes = tuple(NodeHandle(f"{pool_id}-{i}", "127.0.0.1", instance_type="fake") for i in range(count))

        relay = FakeRelay(transport) if self.relayed else None
        if relay is not None:
            self.relays.append(relay)

        def stop() -> None:
            if relay is not None:
                relay.stop()
            for runner in list(transport.runners.values()):
                runner.shutdown()
            streams.restore()

        if relay is not None:  # nodes join on the relay's side (its FakeTransport)
            client = RelayTransport(RelayEndpoint.on_unix_socket(relay.address, relay.secret, compress=True))
            return LaunchedCluster(nodes, infos, client, encode, NoCollections(), stop, membership=membership)
        return LaunchedCluster(nodes, infos, transport, encode, NoCollections(), stop, membership=membership)


class TransportBackend:
    """A head relay's backend over a ``FakeTransport`` (see ``engine.relay_server``)."""

    def __init__(self, transport: FakeTransport, sink: Sink) -> None:
        self.transport = transport
        self._metrics = True
        self.ended = threading.Event()
        transport.open(asyncio.get_running_loop(), _SinkFeed(sink, lambda: self._metrics))  # type: ignore[arg-type]

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        return await self.transport.call(node, payload, timeout)

    async def share(self, payload: Payload) -> Shared:
        return await self.transport.share(payload)

    def unshare(self, shared: Shared) -> None:
        self.transport.unshare(shared)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        raise NotImplementedError("the fake cluster has no distributed collections")

    def forget_collection(self, call_id: int) -> None:
        pass

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        raise NotImplementedError("the relayed fake cluster's nodes do not change")

    def detach(self, node: int, reason: str) -> None:
        self.transport.detach(node, reason)

    def set_metrics(self, on: bool) -> None:
        self._metrics = on

    def release_holds(self) -> None:
        """Nothing to free: the fake cluster has no collections."""

    def end(self) -> None:
        self.transport.close()
        self.ended.set()


class _SinkFeed:
    """An ``EventFeed`` face for a relay's ``Sink``: batches go out encoded."""

    def __init__(self, sink: Sink, wants_metrics: Callable[[], bool]) -> None:
        self._sink = sink
        self.wants_metrics = wants_metrics

    def submit(self, node: int, batch: EventBatch) -> None:
        self._sink.events(node, batch.encode())

    def report(self, message: str) -> None:
        self._sink.report(message)


class FakeRelay:
    """A ``RelayServer`` over ``transport`` on a Unix socket in a private temp dir, served
    by a loop thread of its own; ``backends`` are the backends it opened."""

    def __init__(self, transport: FakeTransport) -> None:
        self.secret = handshake.new_secret()
        self.backends: list[TransportBackend] = []
        self._dir = tempfile.mkdtemp(prefix="fake-relay-")
        self.address = os.path.join(self._dir, "relay.sock")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-relay", daemon=True)
        self._thread.start()

        def open_backend(sink: Sink) -> TransportBackend:
            self.backends.append(TransportBackend(transport, sink))
            return self.backends[-1]

        async def start() -> tuple[RelayServer, asyncio.AbstractServer]:
            server = RelayServer(self.secret, open_backend, compress=True)  # as a remote pool's relay
            return server, await asyncio.start_unix_server(server.handle, self.address)

        self.server, self._listener = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def stop(self) -> None:
        """Stop serving, once a served client's session has finished (at most 5 s), as
        the head relay process exits when its server is finished."""
        if self.backends:
            waited = asyncio.run_coroutine_threadsafe(asyncio.wait_for(self.server.finished.wait(), 5), self.loop)
            with contextlib.suppress(TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
                waited.result(6)
        self.loop.call_soon_threadsafe(self._listener.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class _Output:
    """Task output of the in-process nodes: ``sys.stdout``/``sys.stderr`` route each line
    to the node running the task (elsewhere, to the original streams)."""

    def __init__(self, runners: dict[int, NodeRunner]) -> None:
        self._saved = (sys.stdout, sys.stderr)
        self._runners = runners
        self._streams = [TaskStream("stdout", sys.stdout, self._line), TaskStream("stderr", sys.stderr, self._line)]
        sys.stdout, sys.stderr = self._streams  # type: ignore[assignment]
        for runner in runners.values():
            self.watch(runner)
        publish.install(self._publish)

    def watch(self, runner: NodeRunner) -> None:
        """Route the output of ``runner``'s tasks too."""
        runner.on_task_end(self._flush)

    def _publish(self, event: Any) -> None:
        task = current_task()
        if task is not None:
            self._runners[task.info.node].publish(task.task_id, event)

    def _line(self, stream: str, line: str) -> None:
        task = current_task()
        runner = self._runners.get(task.info.node) if task is not None else None
        if task is not None and runner is not None:
            runner.line(task.task_id, stream, line)

    def _flush(self, task_id: str) -> None:
        for stream in self._streams:
            stream.flush_task(task_id)

    def restore(self) -> None:
        if (sys.stdout, sys.stderr) == tuple(self._streams):
            sys.stdout, sys.stderr = self._saved


def skip_if_fake(pool: sky.Pool, needs: str) -> None:
    """Skip the calling test on a fake pool, which lacks ``needs`` (e.g. "a process per node")."""
    import pytest

    if pool.spec is not None and pool.spec.provider.name == FakeProvider.name:
        pytest.skip(f"the fake cluster has no {needs}")
