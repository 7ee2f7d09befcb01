"""An in-process cluster for the engine's tests: ``FakeTransport`` runs each node's tasks
with the same ``NodeRunner`` a node agent uses, on threads of the test process, so the
driver's scheduling, timeouts, error mapping and event ordering run without Ray (the
role httpx's MockTransport plays for httpx).

Faults are scripted per node: ``fail_next(node, error)`` makes the next call to that
node raise a ``TransportError`` after it reached the node; ``hold(node)`` makes calls to
it wait until ``release(node)``. ``FakeProvider`` turns it into a pool
(``sky.Compute(provider=FakeProvider(), nodes=4)``), used by ``pytest --provider fake``.
Its pools have no distributed collections, metrics or process executor.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import skyward as sky
from skyward.api.instance import InstanceInfo, NetworkInfo, PeerInfo, current_task
from skyward.api.output import TaskStream
from skyward.engine.events import EventBatch, EventFeed
from skyward.engine.transport import NoReply, Shared, TransportError
from skyward.engine.wire import Payload, encode
from skyward.node import publish
from skyward.node.agent import AgentSetup, NodeRunner
from skyward.providers.base import Cluster, NodeHandle, Offer

POLL_WAIT = 0.05


class FakeTransport:
    """Calls in-process ``NodeRunner``s; ``runners[i]`` is node ``i``."""

    def __init__(self, runners: list[NodeRunner], threads: int) -> None:
        self.runners = runners
        self._threads = ThreadPoolExecutor(threads, "fake-node")
        self._faults: dict[int, TransportError] = {}
        self._gates = {node: threading.Event() for node in range(len(runners))}
        for gate in self._gates.values():
            gate.set()
        self._keys = itertools.count()
        self._stop = threading.Event()
        self._events: threading.Thread | None = None
        self.calls: list[int] = []

    @property
    def nodes(self) -> int:
        return len(self.runners)

    @property
    def can_call_now(self) -> bool:
        return True

    def fail_next(self, node: int, error: TransportError) -> None:
        """The next call to ``node`` runs, then raises ``error``."""
        self._faults[node] = error

    def hold(self, node: int) -> None:
        """Calls to ``node`` wait (up to 30 s) until ``release(node)``."""
        self._gates[node].clear()

    def release(self, node: int) -> None:
        self._gates[node].set()

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventFeed) -> None:
        self._events = threading.Thread(target=self._poll, args=(feed,), name="fake-events", daemon=True)
        self._events.start()

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        return self._run(node, payload)

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        body = payload.handle if isinstance(payload, Shared) else payload
        future = asyncio.get_running_loop().run_in_executor(self._threads, self._run, node, body)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise NoReply(node, "no answer in time") from None

    async def share(self, payload: Payload) -> Shared:
        return Shared(next(self._keys), payload)

    def unshare(self, shared: Shared) -> None:
        pass

    def close(self) -> None:
        self._stop.set()
        if self._events is not None:
            self._events.join(5)
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _run(self, node: int, payload: Payload) -> Payload:
        self.calls.append(node)
        self._gates[node].wait(30)
        reply = self.runners[node].execute(payload)
        fault = self._faults.pop(node, None)
        if fault is not None:
            raise fault
        return reply

    def _poll(self, feed: EventFeed) -> None:
        while not self._stop.is_set():
            for node, runner in enumerate(self.runners):
                batch = EventBatch.decode(runner.take_events(0.0))
                if batch.events or batch.dropped:
                    feed.submit(node, batch)
            time.sleep(POLL_WAIT)
        for node, runner in enumerate(self.runners):
            feed.submit(node, EventBatch.decode(runner.take_events(0.0)))


class _NoCollections:
    def engine(self) -> Any:
        raise NotImplementedError("the fake cluster has no distributed collections")

    def release(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class FakeProvider:
    """A pool of in-process nodes (see the module docstring)."""

    name: ClassVar[str] = "fake"
    priced: ClassVar[bool] = False
    options_used: ClassVar[frozenset[str]] = frozenset()

    def validate(self, spec: sky.Spec, options: sky.Options) -> None:
        if options.resolved_worker.resolved_executor != "thread":
            raise NotImplementedError("the fake cluster runs tasks on threads only")
        if spec.volumes:
            raise NotImplementedError("the fake cluster's in-process nodes mount no volumes")

    def offers(self, spec: sky.Spec) -> list[Offer]:
        return []

    def default_storage(self, spec: sky.Spec) -> sky.Storage | None:
        return None

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> Cluster:
        count = spec.node_count.desired
        worker = options.resolved_worker
        peers = [PeerInfo(node, "127.0.0.1") for node in range(count)]
        infos = tuple(
            InstanceInfo(node, 0, count, 1, 0.0, 0.0, "127.0.0.1", 0, pool_id, peers, None, NetworkInfo("lo"))
            for node in range(count)
        )
        runners = [NodeRunner(AgentSetup(info, worker, ".", (), {}, (), None)) for info in infos]
        streams = _Output(runners)
        transport = FakeTransport(runners, count * worker.slots + 4)
        nodes = tuple(NodeHandle(f"{pool_id}-{i}", "127.0.0.1", instance_type="fake") for i in range(count))

        def stop() -> None:
            for runner in runners:
                runner.shutdown()
            streams.restore()

        return Cluster(nodes, infos, transport, encode, _NoCollections(), stop)


class _Output:
    """Task output of the in-process nodes: ``sys.stdout``/``sys.stderr`` route each line
    to the node running the task (elsewhere, to the original streams)."""

    def __init__(self, runners: list[NodeRunner]) -> None:
        self._saved = (sys.stdout, sys.stderr)
        self._runners = runners
        self._streams = [TaskStream("stdout", sys.stdout, self._line), TaskStream("stderr", sys.stderr, self._line)]
        sys.stdout, sys.stderr = self._streams  # type: ignore[assignment]
        for runner in runners:
            runner.on_task_end(self._flush)
        publish.install(self._publish)

    def _publish(self, event: Any) -> None:
        task = current_task()
        if task is not None:
            self._runners[task.info.node].publish(task.task_id, event)

    def _line(self, stream: str, line: str) -> None:
        task = current_task()
        if task is not None:
            self._runners[task.info.node].line(task.task_id, stream, line)

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
