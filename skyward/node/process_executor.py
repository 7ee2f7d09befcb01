"""Runs tasks in child processes of the agent (``Worker(executor="process")``).

Each running task has a child to itself; with ``reuse_processes`` the child serves later
tasks too, otherwise it exits after one. A child that outlives its deadline is killed,
which really frees the slot; a child that dies is reported as a crash and replaced (one
that died while idle, or before it got its task, is replaced before the task starts or
reported as a crash of a task that never ran).
The pipes carry the typed messages of ``core.messages`` (``ToWorker``, ``FromWorker``)
through ``core.codec``; the task, its outcome and its events inside them are pickles. A
task's distributed-collection operations arrive as ``Operation`` messages and are served
by the agent's ``Gateway`` (see ``skyward.collections.bridge``), whose answers share the
pipe to the child.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import TypedDict

import cloudpickle

from skyward.collections import bridge
from skyward.collections.config import CollectionsConfig
from skyward.collections.gateway import Gateway
from skyward.core import messages
from skyward.core.codec import MalformedFrame, decode_message, encode_message, load_payload
from skyward.core.instance import InstanceInfo
from skyward.engine import death
from skyward.engine.wire import MAP, Outcome, TaskFailure, TaskRequest
from skyward.model.plugin import LaunchCommand
from skyward.node.execution import ItemClock
from skyward.node.item_cell import ItemCell
from skyward.node.thread_executor import timeout_failure
from skyward.observe.events import Event
from skyward.plugins.node import child_command

STOP_GRACE = 2.0
LineSink = Callable[[str, str, str], None]
EventSink = Callable[[str, Event], None]


class ChildSetup(TypedDict):
    """What a worker process sets itself up with (see ``process_worker``)."""

    info: InstanceInfo
    cwd: str
    sys_path: tuple[str, ...]
    env: dict[str, str]
    collections: CollectionsConfig | None
    plugins: bytes


class _Child:
    """One worker process and the parent's ends of its pipes; ``worker`` is its index
    among the node's children (``instance_info().worker`` inside it)."""

    def __init__(self, setup: ChildSetup, worker: int) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.worker = worker
        info = replace(setup["info"], worker=worker)
        setup = {**setup, "info": info}
        item_fd = -1
        try:
            self.item, item_fd = ItemCell.create()
            command = child_command(
                LaunchCommand(
                    (sys.executable,),
                    ("-m", "skyward.node.process_worker", str(to_child_r), str(from_child_w), str(item_fd)),
                ),
                info,
            )
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **command.env, **setup["env"]}
            self.process = subprocess.Popen(
                command.argv,
                pass_fds=(to_child_r, from_child_w, item_fd),
                env=env,
                cwd=setup["cwd"],
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            os.close(to_child_w)
            os.close(from_child_r)
            raise
        finally:
            for fd in (to_child_r, from_child_w, item_fd):
                if fd >= 0:
                    os.close(fd)
        self.cgroup = death.memory_cgroup(self.process.pid)
        self.send = Connection(to_child_w, readable=False)
        self.recv = Connection(from_child_r, writable=False)
        self._send_lock = threading.Lock()
        self.info: InstanceInfo = setup["info"]
        self.write(messages.StartWorker(
            setup["cwd"], tuple(setup["sys_path"]), cloudpickle.dumps(info),
            cloudpickle.dumps(setup["collections"]) if setup["collections"] is not None else b"", setup["plugins"],
        ))

    def write(self, message: messages.ToWorker) -> None:
        """Send one message to the child (tasks and collection answers share the pipe)."""
        data = encode_message(message)
        with self._send_lock:
            self.send.send_bytes(data)

    def run(self, request: TaskRequest, info: InstanceInfo, sink: LineSink, gateway: Gateway, publish: EventSink) -> Outcome:
        """Send ``request`` (with ``info``, under this child's worker index, when it changed
        since the child last got it) and relay its output until it is done, dies or times out."""
        node = info.node
        info = replace(info, worker=self.worker)
        # a map's child stores 0 when item 0 starts (a change the watch below sees); a call,
        # which stores nothing, is item 0 from its send, so its timeout has no start allowance
        self.item.set(-1 if request.kind == MAP else 0)
        try:
            self.write(messages.RunTask(cloudpickle.dumps(request), cloudpickle.dumps(info) if info != self.info else b""))
        except OSError:  # it died before it got the task (a broken pipe): nothing of the task ran
            return False, self._crash(request, node)
        self.info = info
        clock = ItemClock(request.timeout) if request.timeout is not None else None
        while True:
            wait = None
            if clock is not None and (wait := clock.look(self.item.get())) is None:
                self.kill()
                return False, timeout_failure(request, node, clock.item)
            try:
                if not self.recv.poll(wait):
                    continue
                message = decode_message(self.recv.recv_bytes())
            except (EOFError, OSError):
                return False, self._crash(request, node)
            except MalformedFrame:  # not a worker's message: the child is not what it should be
                self.kill()
                return False, self._crash(request, node)
            match message:
                case messages.Operation(call_id, operation):
                    bridge.serve(gateway, call_id, operation, self.write)
                case messages.TaskOutput(stream, line):
                    sink(request.task_id, stream, line)
                case messages.TaskEvent(event):
                    publish(request.task_id, load_payload(event))
                case messages.TaskDone(outcome):
                    done: Outcome = load_payload(outcome)
                    return done
                case _:  # a message meant for a worker, not from one
                    self.kill()
                    return False, self._crash(request, node)

    def _crash(self, request: TaskRequest, node: int) -> TaskFailure:
        """The failure of ``request``, whose child died (of a map, naming the item it ran)."""
        item = max(0, self.item.get())
        code = self.process.wait(timeout=10)
        cause = death.describe_exit(code, death.oom_kills_since(self.cgroup))
        running = f"map({request.name})" if request.kind == MAP else request.name
        message = (
            f"the worker process running {running} on node {node} died: {cause}. "
            "A fresh process serves the next task."
        )
        return TaskFailure(
            "NodeCrashedError", message, "", node, item=item if request.kind == MAP else None, crashed=True
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=10)
        self.send.close()
        self.recv.close()

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Close the child's input so it exits by itself (its plugins' ``around_process``
        exit); killed if still there after ``grace`` seconds."""
        self.send.close()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


class ProcessExecutor:
    """Hands each request to an idle child (or a new one, set up with ``setup``) and
    returns the outcome; ``reuse``: a child runs one task after another."""

    def __init__(self, setup: ChildSetup, reuse: bool, sink: LineSink, gateway: Gateway, publish: EventSink) -> None:
        self._info = setup["info"]
        self._setup = setup
        self._reuse = reuse
        self._sink = sink
        self._gateway = gateway
        self._publish = publish
        self._idle: list[_Child] = []
        self._all: set[_Child] = set()
        self._workers: set[int] = set()
        """The worker indices of live children (a new child takes the lowest free one)."""
        self._lock = threading.Lock()

    def set_info(self, info: InstanceInfo) -> None:
        """Tasks started from now on see ``info`` (the pool's membership changed)."""
        self._info = info

    def run(self, request: TaskRequest, release_slot: Callable[[], None]) -> Outcome:
        """Run ``request`` in a child; the slot is held until the child answers or is
        killed at the deadline, so ``release_slot`` is left to the caller."""
        child = self._checkout()
        try:
            return child.run(request, self._info, self._sink, self._gateway, self._publish)
        finally:
            self._checkin(child)

    def _checkout(self) -> _Child:
        """An idle child that is still alive (one that died while idle is retired), or a
        new one."""
        while True:
            with self._lock:
                idle = self._idle.pop() if self._idle else None
            if idle is None:
                break
            if idle.alive():
                return idle
            self._retire(idle)
        with self._lock:
            worker = next(index for index in itertools.count() if index not in self._workers)
            self._workers.add(worker)
        try:
            child = _Child(self._setup, worker)
        except BaseException:
            with self._lock:
                self._workers.discard(worker)
            raise
        with self._lock:
            self._all.add(child)
        return child

    def _checkin(self, child: _Child) -> None:
        if self._reuse and child.alive():
            with self._lock:
                self._idle.append(child)
            return
        self._retire(child)

    def _retire(self, child: _Child) -> None:
        """Stop ``child`` (if it still runs) and free its worker index."""
        child.stop()
        with self._lock:
            self._all.discard(child)
            self._workers.discard(child.worker)

    def close(self) -> None:
        with self._lock:
            children, self._all, self._idle = list(self._all), set(), []
            self._workers = set()
        for child in children:
            child.send.close()
        deadline = time.monotonic() + STOP_GRACE
        for child in children:
            child.stop(max(0.0, deadline - time.monotonic()))
