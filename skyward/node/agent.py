"""``NodeAgent``: the long-lived Ray actor that runs a node's tasks.

One agent per node, pinned there by its provider. It keeps warm state between tasks
(module globals, loaded models), runs at most ``Worker.concurrency`` tasks at once (more
wait in the node's buffer), keeps every task's output lines in its ``Outbox`` until the
client takes them, serves collection operations for processes outside the Ray cluster
(its executor children, a remote client) through a ``Gateway``, and never raises out of
``execute``: a failure is an outcome. If its process dies, Ray starts a fresh agent in
its place.

``start_agents`` is the one place agents are created (local pools, attached Ray
clusters and the head relay of remote pools all use it).
"""

from __future__ import annotations

import functools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Protocol

import cloudpickle
import ray
from msgspec import structs
from ray import ObjectRef
from ray.actor import ActorHandle

from skyward.collections import installed as collections_installed
from skyward.collections.config import CollectionsConfig
from skyward.collections.gateway import GATEWAY_THREADS, Gateway
from skyward.core.instance import InstanceInfo, MembershipView, current_task, install_node_info
from skyward.core.output import TaskStream
from skyward.core.validation import wait_limit
from skyward.engine import death, publish
from skyward.engine.events import EventBatch
from skyward.engine.transports.lane import TCP, LaneServer
from skyward.engine.transports.ray_actors import AgentHandle
from skyward.engine.wire import CALL, PROBE, Payload, Received, TaskFailure, TaskRequest, decode_request, encode
from skyward.model.plugin import LaunchCommand
from skyward.model.spec import Worker
from skyward.node.outbox import Outbox
from skyward.node.thread_executor import ThreadExecutor
from skyward.observe.events import Event, Log
from skyward.observe.metrics import Collector, MetricSampler
from skyward.plugins import node as node_plugins
from skyward.plugins.hooks import ray_options

EXTRA_THREADS = 40
"""Actor threads beyond the task slots, for event polls, readiness checks and shutdown."""
COLLECTIONS_GROUP = "collections"


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
    _: KW_ONLY
    lane: str = ""
    """Where the agent listens beside Ray: a Unix socket path, ``tcp://`` (TCP on its
    host's Ray address, see ``transports.lane``) or "" for no lane."""
    lane_secret: bytes = field(default=b"", repr=False)
    """What a caller of a TCP lane must prove it knows (left out of the repr: a setup
    printed in a log or an error does not hand it out)."""
    notes: str = ""
    """Where the agent leaves the note of its post-mortem (``death.arm``); "" for none."""
    plugins: bytes = b""
    """The pool's plugins, pickled (``skyward.plugins.node.pack``); b"" for none."""
    launch: LaunchCommand | None = None
    """How Ray starts the agent (another interpreter, a launcher's prefix); None: Ray's default."""


class _Slots:
    """``count`` task slots: a queue of tokens, taken and given back in C (a
    ``threading.Semaphore`` is Python code around a condition, a few µs a call)."""

    def __init__(self, count: int) -> None:
        self._free: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(count):
            self._free.put(None)

    def take(self) -> _SlotLease:
        """Wait for a free slot and hold it."""
        self._free.get()
        return _SlotLease(self._free)


class _SlotLease:
    """A held slot, given back exactly once: by whichever ``release`` first takes the one
    token it holds (``list.pop`` is atomic, so no lock is needed)."""

    __slots__ = ("_free", "_token")

    def __init__(self, free: queue.SimpleQueue[None]) -> None:
        self._free = free
        self._token: list[None] = [None]

    def release(self) -> None:
        try:
            self._token.pop()
        except IndexError:  # given back already (its deadline passed)
            return
        self._free.put(None)


class NodeRunner:
    """The part of an agent that runs tasks and keeps their events, with nothing
    process-wide: the agent adds the process setup around it (and tests can run several
    in one process)."""

    def __init__(self, setup: AgentSetup) -> None:
        self.info = setup.info
        self.outbox = Outbox()
        self._sampler = MetricSampler(setup.metrics, setup.info.node, self.outbox.put).start()
        self._printed: set[str] = set()
        self._slots = _Slots(setup.worker.concurrency)
        self.gateway = Gateway(collections_installed.node_operations, setup.info.node)
        self._task_ended_hooks: list[Callable[[str], object]] = []
        self._info_hooks: list[Callable[[InstanceInfo], object]] = []
        self._epoch = 0
        self._view_lock = threading.Lock()
        self._probes = ThreadExecutor(setup.info, 1, lambda task_id: None)
        if setup.worker.resolved_executor == "process":
            from skyward.node.process_executor import ChildSetup, ProcessExecutor  # not on a thread pool's path

            child_setup: ChildSetup = {
                "info": setup.info, "cwd": setup.cwd, "sys_path": setup.sys_path, "env": setup.env,
                "collections": setup.collections, "plugins": setup.plugins,
            }
            self._executor: ProcessExecutor | ThreadExecutor = ProcessExecutor(
                child_setup, setup.worker.reuse_processes, self.line, self.gateway, self.publish
            )
        else:
            self._executor = ThreadExecutor(setup.info, setup.worker.concurrency, self._task_ended)

    def on_task_end(self, hook: Callable[[str], object]) -> None:
        """Call ``hook(task_id)`` after each thread-executor task (to flush its output)."""
        self._task_ended_hooks.append(hook)

    def on_info(self, hook: Callable[[InstanceInfo], object]) -> None:
        """Call ``hook(info)`` when the pool's membership changed this node's InstanceInfo."""
        self._info_hooks.append(hook)

    def _apply(self, view: MembershipView) -> None:
        """Take the pool's membership at ``view.epoch`` (an older one is ignored)."""
        with self._view_lock:
            if view.epoch <= self._epoch:
                return
            self._epoch = view.epoch
            self.info = view.applied(self.info)
            for executor in (self._executor, self._probes):
                executor.set_info(self.info)
            for hook in self._info_hooks:
                hook(self.info)

    def take_events(self, wait: float) -> bytes:
        """The encoded ``EventBatch`` of what this node produced since the last call."""
        return EventBatch(*self.outbox.take(wait)).encode()

    def sample_metrics(self, on: bool) -> None:
        """Sample this node's metrics (``on``) or pause sampling: nobody listens for them."""
        self._sampler.sample(on)

    def execute(self, payload: Received) -> Payload:
        """Run an encoded ``TaskRequest`` when a slot is free. Returns the encoded
        ``(ok, value_or_TaskFailure, events)``: ``events`` is 0 if the task printed
        nothing, else how many events this node's outbox held once its output was in,
        so the client can deliver that output before the result."""
        try:
            request = decode_request(payload)
        except Exception as exc:  # e.g. the function's module does not exist on this node
            failure = TaskFailure.from_exception(exc, self.info.node)
            return encode((False, _unloadable(failure, self.info.node), 0))
        if request.view is not None:
            self._apply(request.view)
        if request.kind == PROBE:
            return encode((*self._probes.run(structs.replace(request, kind=CALL), lambda: None), 0))
        slot = self._slots.take()
        writes_lost = collections_installed.writes_lost()
        try:
            ok, value = self._executor.run(request, slot.release)
        finally:
            slot.release()
        lost = collections_installed.end_task(request.task_id, ok, writes_lost)
        if ok and lost is not None:  # the task's collection writes may be gone: so is its result
            ok, value = False, TaskFailure.from_exception(lost, self.info.node)
        events = 0
        if request.task_id in self._printed:
            self._printed.discard(request.task_id)
            events = self.outbox.published
        try:
            return encode((ok, value, events))
        except Exception as exc:
            message = f"the result of {request.name} cannot be pickled to send back: {exc}"
            failure = TaskFailure("TypeError", message, "", self.info.node, cloudpickle.dumps(TypeError(message)))
            return encode((False, failure, events))

    def line(self, task_id: str, stream: str, line: str) -> None:
        """A line a task (or, with no ``task_id``, the node) printed."""
        if task_id:
            self._printed.add(task_id)
        self.outbox.put(Log(self.info.node, line, stream, task_id or None))

    def publish(self, task_id: str, event: Event) -> None:
        """An event task ``task_id`` sends to the client (its result waits for it)."""
        self._printed.add(task_id)
        self.outbox.put(event)

    def line_from_task(self, stream: str, line: str) -> None:
        """``line`` for the task running on this thread (none: the node's)."""
        task = current_task()
        self.line(task.task_id if task else "", stream, line)

    def publish_from_task(self, event: Event) -> None:
        """``publish`` for the task running on this thread (none: the node's)."""
        task = current_task()
        self.publish(task.task_id if task else "", event)

    def _task_ended(self, task_id: str) -> None:
        for hook in self._task_ended_hooks:
            hook(task_id)

    def shutdown(self) -> None:
        self._sampler.stop()
        self._executor.close()
        self._probes.close()


class NodeAgent:
    """One node's agent process (a Ray actor created by ``start_agents``): sets the
    process up for the pool and serves its ``NodeRunner``. Ray restarts it with the same
    ``setup`` after a crash."""

    def __init__(self, setup: AgentSetup) -> None:
        self._lane: LaneServer | None = None
        self._notes = setup.notes
        self._node = setup.info.node
        os.chdir(setup.cwd)
        sys.path[:0] = [p for p in setup.sys_path if p not in sys.path]
        os.environ.update(setup.env)
        info, self._plugins = node_plugins.install_agent(setup.plugins, setup.info)
        setup = replace(setup, info=info)
        install_node_info(setup.info)
        if setup.notes:
            death.arm(setup.notes, setup.info.node)
        collections_installed.install_node(setup.collections)
        self._runner = NodeRunner(setup)
        self._runner.on_info(install_node_info)
        # the runner's methods and plain functions, not this class's: Ray wraps every method
        # of an actor class in a tracing span, a few µs a call
        publish.install(self._runner.publish_from_task)
        self._streams = [
            TaskStream("stdout", sys.stdout, self._runner.line_from_task),
            TaskStream("stderr", sys.stderr, self._runner.line_from_task),
        ]
        sys.stdout, sys.stderr = self._streams
        self._runner.on_task_end(functools.partial(_flush_streams, tuple(self._streams)))
        # the runner's own method: a lane call has no use for the tracing wrapper Ray puts on actor methods
        self._lane = _open_lane(setup, self._runner.execute, ray.util.get_node_ip_address)

    def take_events(self, wait: float) -> bytes:
        """The encoded ``EventBatch`` of what this node produced since the last call."""
        return self._runner.take_events(wait)

    def sample_metrics(self, on: bool) -> None:
        """Sample this node's metrics (``on``) or pause sampling: nobody listens for them."""
        self._runner.sample_metrics(on)

    def wake_events(self) -> None:
        """End a pending ``take_events`` at once, and do not wait in later ones until
        ``resume_events``: the client is closing the pool."""
        self._runner.outbox.wake()

    def resume_events(self) -> None:
        """Wait in ``take_events`` again: a new client polls (a kept pool's next script)."""
        self._runner.outbox.resume()

    def ready(self) -> int:
        """Answer once started; returns the agent's process id."""
        return os.getpid()

    def lane_address(self) -> str:
        """Where this agent's lane listens ("" for none)."""
        return self._lane.address if self._lane is not None else ""

    def postmortem(self) -> death.Death | None:
        """Why this node's previous agent died (read on its machine, from the note it
        left: see ``death``), or None when it left none."""
        return death.cause_of_death(self._notes, self._node) if self._notes else None

    def execute(self, payload: Received) -> Payload:
        """Run an encoded ``TaskRequest`` (see ``NodeRunner.execute``)."""
        return self._runner.execute(payload)

    @ray.method(concurrency_group=COLLECTIONS_GROUP)
    def collection(self, client: str, call_id: int, request: bytes) -> bytes:
        """Run one encoded collection operation for the remote client ``client``."""
        return self._runner.gateway.run(request, client, call_id)

    def cancel_collection(self, client: str, call_id: int) -> None:
        """Stop ``client``'s operation ``call_id`` (it ends within one wait slice)."""
        self._runner.gateway.cancel(client, call_id)

    def end_client(self, client: str) -> None:
        """Remote client ``client`` is gone: free its locks, break the barriers it joined."""
        self._runner.gateway.end_client(client)

    def shutdown(self) -> None:
        """Stop sampling and executor children; ``stop_agents`` then kills the actor."""
        if self._lane is not None:
            self._lane.close()
        self._runner.shutdown()
        self._plugins.close()


def _flush_streams(streams: tuple[TaskStream, ...], task_id: str) -> None:
    """End task ``task_id``'s unfinished lines in ``streams``."""
    for stream in streams:
        stream.flush_task(task_id)


def _open_lane(
    setup: AgentSetup, handle: Callable[[Payload], Payload], host: Callable[[], str]
) -> LaneServer | None:
    """The agent's lane, if its setup asks for one. A TCP lane listens on ``host()`` (the
    host's Ray address), on the port this node's previous agent had (kept beside its
    notes) when it is free, else any; one that cannot listen at all leaves the agent
    without a lane (its calls go through Ray)."""
    if not setup.lane:
        return None
    if setup.lane != TCP:
        return LaneServer(setup.lane, handle)
    remembered = os.path.join(setup.notes, f"lane-{setup.info.node}.port") if setup.notes else ""
    port = 0
    if remembered and os.path.exists(remembered):
        with open(remembered, encoding="utf-8") as file:
            port = int(file.read().strip() or 0)
    address = host()
    lane = None
    for candidate in dict.fromkeys((port, 0)):
        try:
            lane = LaneServer(f"{TCP}{address}:{candidate}", handle, setup.lane_secret)
            break
        except OSError:
            continue
    if lane is not None and remembered:
        os.makedirs(setup.notes, exist_ok=True)
        with open(remembered, "w", encoding="utf-8") as file:
            file.write(lane.address.rpartition(":")[2])
    return lane


def _unloadable(failure: TaskFailure, node: int) -> TaskFailure:
    """A request that could not be loaded on ``node``, with the likely fix."""
    hint = (
        f"the task could not be loaded on node {node}: {failure.type_name}: {failure.message}. "
        "Install the missing package on the nodes (Image.pip) or ship your code with Image.includes"
    )
    return TaskFailure(failure.type_name, hint, failure.traceback, node, failure.exception)


def start_agents(
    setups: Sequence[AgentSetup], placement: Sequence[dict[str, object]] = ()
) -> list[ActorHandle[NodeAgent]]:
    """One ``NodeAgent`` actor per setup; ``placement[i]`` are extra Ray actor options
    for agent ``i`` (resources, scheduling strategy) that pin it to its node."""
    if not setups:
        return []
    remote_agent = _agent_class(setups[0].worker.slots)
    options = list(placement) or [{} for _ in setups]
    return [
        remote_agent.options(**extra, **ray_options(setup.launch)).remote(setup)
        for setup, extra in zip(setups, options)
    ]


class _AgentClass(Protocol):
    """``NodeAgent`` as a Ray actor class, with the options it is started with."""

    def options(self, **options: object) -> _AgentClass: ...

    def remote(self, setup: AgentSetup) -> ActorHandle[NodeAgent]: ...


def _agent_class(slots: int) -> _AgentClass:
    return ray.remote(  # type: ignore[call-overload]  # Ray's stubs lack the actor options
        num_cpus=0,
        max_restarts=-1,
        max_task_retries=0,
        max_concurrency=slots + EXTRA_THREADS,
        concurrency_groups={COLLECTIONS_GROUP: GATEWAY_THREADS},
    )(NodeAgent)


def wait_ready(agents: Sequence[AgentHandle], timeout: float, where: str, hint: str) -> None:
    """Return once every agent answers; TimeoutError naming how many did not (and
    ``hint``, the likely fix) after ``timeout`` seconds."""
    if not agents:
        return
    started = time.monotonic()
    refs: list[ObjectRef[int]] = [agent.ready.remote() for agent in agents]
    ready, pending = ray.wait(refs, num_returns=len(refs), timeout=wait_limit(timeout))
    if pending:
        raise TimeoutError(
            f"{len(pending)} of {len(agents)} node agents {where} did not start within {timeout:g}s "
            f"(waited {time.monotonic() - started:.1f}s); {hint}"
        )
    ray.get(ready)


def stop_agents(agents: Sequence[AgentHandle]) -> None:
    """Ask every agent to shut down (bounded), then kill the actors."""
    refs: list[ObjectRef[None]] = []
    for agent in agents:
        try:
            refs.append(agent.shutdown.remote())
        except Exception:
            continue
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=5)
    for agent in agents:
        if not isinstance(agent, ActorHandle):  # ray.kill would refuse it
            continue
        try:
            ray.kill(agent, no_restart=True)
        except Exception:
            pass


def stop_started(agents: Sequence[AgentHandle], collections: CollectionsConfig | None) -> None:
    """Undo an open that failed part-way: stop ``agents``, then kill the collections'
    hosts it began (``collections``; None when it had not got that far)."""
    stop_agents(agents)
    if collections is not None:
        collections_installed.release(collections)
