"""``NodeAgent``: the long-lived Ray actor that runs a node's tasks.

One agent per node, pinned there by the node's custom resource. It keeps warm state
between tasks (module globals, loaded models), runs at most ``Worker.concurrency`` tasks
at once (more wait in the node's buffer), keeps every task's output lines in its
``Outbox`` until the client polls them, and never raises out of ``execute``: a failure
is an outcome. If its process dies, Ray starts a fresh agent in its place.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from skyward.cluster.lane import LaneServer
from skyward.cluster.outbox import Outbox
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

@dataclass(frozen=True, slots=True)
class AgentSetup:
    """Everything an agent needs to know at start (and again after a restart)."""

    info: InstanceInfo
    worker: Worker
    cwd: str
    sys_path: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    metrics: tuple[Collector, ...] = ()
    collections: CollectionsConfig | None = None
    lane: str = ""


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
        self._outbox = Outbox()
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

    def take_events(self, wait: float) -> tuple[list[Any], int, int]:
        """The events this node produced since the last call (see ``Outbox.take``)."""
        return self._outbox.take(wait)

    def wake_events(self) -> None:
        """End a pending ``take_events`` at once: the client is closing the pool."""
        self._outbox.wake()

    def ready(self) -> int:
        """Answer once started; returns the agent's process id."""
        return os.getpid()

    def execute(self, payload: Payload) -> Payload:
        """Run an encoded ``TaskRequest`` when a slot is free. Returns the encoded
        ``(ok, value_or_TaskFailure, events)``: ``events`` is 0 if the task printed
        nothing, else how many events this agent's outbox held once its output was in,
        so the client can print that output before the result."""
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
            events = self._outbox.published
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
        """Stop sampling and executor children; the driver then kills the actor."""
        if self._lane is not None:
            self._lane.close()
        self._sampler.stop()
        self._executor.close()
