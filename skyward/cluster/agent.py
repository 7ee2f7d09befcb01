"""``NodeAgent``: the long-lived Ray actor that runs a node's tasks.

One agent per node, pinned there by the node's custom resource. It keeps warm state
between tasks (module globals, loaded models), runs at most ``Worker.concurrency`` tasks
at once (more wait in the node's buffer), sends every task's output lines to the
client through the event hub, and never raises out of ``execute``: a failure is an
outcome. If its process dies, Ray starts a fresh agent in its place.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import ray

from skyward.cluster.lane import LaneServer
from skyward.cluster.process_executor import ProcessExecutor
from skyward.cluster.thread_executor import ThreadExecutor
from skyward.cluster.wire import Payload, TaskFailure, TaskRequest, decode, encode
from skyward.collections import runtime as collections_runtime
from skyward.collections.config import CollectionsConfig
from skyward.observe.events import Log
from skyward.observe.metrics import Collector, MetricSampler
from skyward.output import TaskStream
from skyward.runtime import InstanceInfo, current_task, install_node_info
from skyward.spec import Worker

FLUSH_INTERVAL = 0.02


@dataclass(frozen=True, slots=True)
class AgentSetup:
    """Everything an agent needs to know at start (and again after a restart)."""

    info: InstanceInfo
    worker: Worker
    cwd: str
    sys_path: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    hub_name: str = ""
    metrics: tuple[Collector, ...] = ()
    collections: CollectionsConfig | None = None
    lane: str = ""


class _Outbox:
    """Batches events and publishes them to the hub every ``FLUSH_INTERVAL`` seconds."""

    def __init__(self, hub: Any) -> None:
        self._hub = hub
        self._events: list[Any] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        threading.Thread(target=self._loop, name="skyward-outbox", daemon=True).start()

    def put(self, event: Any) -> None:
        with self._lock:
            self._events.append(event)
        self._wake.set()

    def flush(self) -> None:
        """Publish what is buffered without waiting."""
        with self._lock:
            events, self._events = self._events, []
        if events:
            self._hub.publish.remote(events)

    def flush_and_count(self) -> int:
        """Publish what is buffered and wait for the hub: returns how many events it has
        received in all, which covers every event this agent put before the call."""
        with self._lock:
            events, self._events = self._events, []
        return int(ray.get(self._hub.publish.remote(events)))

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(FLUSH_INTERVAL)
            self._wake.clear()
            self.flush()


class _SlotLease:
    """A held concurrency slot that is given back exactly once."""

    def __init__(self, semaphore: threading.BoundedSemaphore) -> None:
        self._semaphore = semaphore
        self._lock = threading.Lock()
        self._held = True

    def release(self) -> None:
        with self._lock:
            if not self._held:
                return
            self._held = False
        self._semaphore.release()


class NodeAgent:
    """Runs tasks on one node. Created through ``ray.remote`` by the cluster driver."""

    def __init__(self, setup: AgentSetup) -> None:
        os.chdir(setup.cwd)
        sys.path[:0] = [p for p in setup.sys_path if p not in sys.path]
        os.environ.update(setup.env)
        install_node_info(setup.info)
        collections_runtime.install_node(setup.collections)
        self._info = setup.info
        self._outbox = _Outbox(ray.get_actor(setup.hub_name))
        self._sampler = MetricSampler(setup.metrics, setup.info.node, self._outbox.put).start()
        self._printed: set[str] = set()
        self._running = threading.BoundedSemaphore(setup.worker.concurrency)
        self._streams = [
            TaskStream("stdout", sys.stdout, self._current_line),
            TaskStream("stderr", sys.stderr, self._current_line),
        ]
        sys.stdout, sys.stderr = self._streams  # type: ignore[assignment]
        if setup.worker.resolved_executor == "process":
            child_setup = {
                "cwd": setup.cwd, "sys_path": setup.sys_path, "env": setup.env, "collections": setup.collections,
            }
            self._executor: Any = ProcessExecutor(
                setup.info, setup.worker.reuse_processes, self._line, child_setup
            )
        else:
            self._executor = ThreadExecutor(setup.info, setup.worker.concurrency, self._task_ended)
        self._lane = LaneServer(setup.lane, self.execute) if setup.lane else None

    def ready(self) -> int:
        """Answer once started; returns the agent's process id."""
        return os.getpid()

    def execute(self, payload: Payload) -> Payload:
        """Run an encoded ``TaskRequest`` when a slot is free. Returns the encoded
        ``(ok, value_or_TaskFailure, events)``: ``events`` is 0 if the task printed
        nothing, else the hub's event count once its output was published, so the client
        can print it before the result."""
        request: TaskRequest = decode(payload)
        self._running.acquire()
        slot = _SlotLease(self._running)
        try:
            ok, value = self._executor.run(request, slot.release)
        finally:
            slot.release()
        collections_runtime.end_task(request.task_id, ok)
        events = 0
        if request.task_id in self._printed:
            self._printed.discard(request.task_id)
            events = self._outbox.flush_and_count()
        try:
            return encode((ok, value, events))
        except Exception as exc:
            message = f"the result of {request.name} cannot be pickled to send back: {exc}"
            failure = TaskFailure("TypeError", message, "", self._info.node, cloudpickle.dumps(TypeError(message)))
            return encode((False, failure, events))

    def _current_line(self, stream: str, line: str) -> None:
        task = current_task()
        self._line(task.task_id if task else "", stream, line)

    def _line(self, task_id: str, stream: str, line: str) -> None:
        if task_id:
            self._printed.add(task_id)
        self._outbox.put(Log(self._info.node, line, stream, task_id or None))

    def _task_ended(self, task_id: str) -> None:
        for stream in self._streams:
            stream.flush_task(task_id)

    def shutdown(self) -> None:
        """Stop sampling and executor children, flush output; the driver then kills the actor."""
        if self._lane is not None:
            self._lane.close()
        self._sampler.stop()
        self._executor.close()
        self._outbox.flush()
