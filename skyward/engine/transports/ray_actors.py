"""``RayTransport``: node agents are Ray actors this process can call (a local pool, an
attached Ray cluster, and the head relay of a remote pool).

A call goes through the agent's lane when it has one (see ``lane``: a Unix socket on the
caller's host, TCP from the head relay to another host's agent), else as a Ray actor
call. A broadcast's payload is stored once in Ray's object store; the head relay of a
pool of up to ``LANE_SHARE_NODES`` nodes holds it instead and sends it over each node's
lane (``share_by_lanes``). ``RayEventSource`` keeps a long poll open on every agent's outbox, on one
thread, and hands each encoded batch to a sink as it arrives.
"""

from __future__ import annotations

import asyncio
import itertools
import pickle
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

import ray
from msgspec import Struct
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from skyward.engine.death import Death
from skyward.engine.events import EventBatch
from skyward.engine.transport import NodeLost, NoReply, Refused, Shared, TransportError
from skyward.engine.transports.lane import LaneBroken, LaneClient, LaneFailed
from skyward.engine.wire import OUT_OF_BAND_BYTES, Payload

if TYPE_CHECKING:
    from ray import ObjectRef

    from skyward.engine.events import EventSink

AGENT_HOLD = 30.0
"""Seconds an agent holds an event poll open with nothing to send (an idle pool costs
one round trip per node per this, not per loop tick)."""
LOOP_TICK = 0.5
"""Seconds between the poll thread's looks at nodes added or removed and at whether
anyone listens for metrics."""
FAILURES_BEFORE_GIVING_UP = 20
STOP_TIMEOUT = 5.0
REPLACEMENT_WAIT = 60.0
LANE_SHARE_NODES = 8
"""The most nodes a relay sends a shared payload to over their lanes, each its own copy
from the head's host; a larger pool's go through Ray's object store, whose nodes also
fetch from each other."""


P = ParamSpec("P")
R = TypeVar("R")


class RemoteMethod(Protocol[P, R]):
    """A method of a Ray actor handle: ``.remote(...)`` calls it and returns at once."""

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]: ...


class AgentHandle(Protocol):
    """A node agent's Ray actor (``node.agent.NodeAgent``) as its client calls it."""

    @property
    def execute(self) -> RemoteMethod[[object], Payload]:
        """Run a request: a ``Payload``, or the ``ObjectRef`` of a shared one."""

    @property
    def ready(self) -> RemoteMethod[[], int]: ...

    @property
    def lane_address(self) -> RemoteMethod[[], str]: ...

    @property
    def take_events(self) -> RemoteMethod[[float], bytes]: ...

    @property
    def wake_events(self) -> RemoteMethod[[], None]: ...

    @property
    def resume_events(self) -> RemoteMethod[[], None]: ...

    @property
    def sample_metrics(self) -> RemoteMethod[[bool], None]: ...

    @property
    def shutdown(self) -> RemoteMethod[[], None]:
        """Stop its sampling and executor children (before the actor is killed)."""


class RayAgent(Struct, frozen=True):
    """A node agent as ``RayTransport`` reaches it: its actor, and its lane's address
    ("" for none)."""

    actor: AgentHandle
    lane: str = ""


class HeldShare:
    """A shared payload kept in this process for the lanes (``share_by_lanes``), and put
    in Ray's object store the first time a call has to go through Ray."""

    __slots__ = ("payload", "_stored")

    def __init__(self, payload: Payload | bytearray) -> None:
        self.payload = payload
        self._stored: ObjectRef[object] | None = None

    def stored(self, put: Callable[[Payload | bytearray], ObjectRef[object]]) -> ObjectRef[object]:
        """Its reference in the object store, ``put`` there on the first call (on the
        transport's loop only)."""
        if self._stored is None:
            self._stored = put(self.payload)
        return self._stored


class RayTransport:
    """Calls ``agents[i]`` (node ``i``); ``lanes[i]`` is its lane's address or "" for
    none (``lane_secret``: what its TCP lanes ask for). Nodes that join later are
    ``attach``ed, nodes that left ``detach``ed. With ``share_by_lanes`` (the head relay,
    whose agents are on other hosts) a shared payload travels over the lanes of a pool of
    up to ``LANE_SHARE_NODES`` nodes, each lane writing it once into the ``bytes`` the
    task receives (``lane``). Through Ray's object store it would be copied in, pulled by
    each other host through its own store in chunks, and copied out again by each agent."""

    def __init__(
        self,
        agents: Sequence[AgentHandle],
        lanes: Sequence[str] = (),
        postmortem: Callable[[int], Death | None] = lambda node: None,
        lane_secret: bytes = b"",
        share_by_lanes: bool = False,
    ) -> None:
        self.agents: dict[int, AgentHandle] = dict(enumerate(agents))
        self._postmortem = postmortem
        self._lane_secret = lane_secret
        self._share_by_lanes = share_by_lanes
        self._senders: ThreadPoolExecutor | None = None
        self._lanes = {node: LaneClient(path, lane_secret) for node, path in enumerate(lanes) if path}
        self._events: RayEventSource | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._gone: dict[int, asyncio.Future[str]] = {}
        self._left: dict[int, str] = {}
        self._keys = itertools.count()
        self._closing = False

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventSink) -> None:
        self._loop = loop
        self._events = RayEventSource(
            self.agents, lambda node, data: feed.submit(node, EventBatch.decode(data)), feed.report,
            feed.wants_metrics,
        )

    def attach(self, node: int, agent: RayAgent) -> None:
        """Node ``node``'s agent (a started actor, answering) joins."""
        self._left.pop(node, None)
        self.agents[node] = agent.actor
        if agent.lane:
            self._lanes[node] = LaneClient(agent.lane, self._lane_secret)
        if self._events is not None:
            self._events.add(node, agent.actor)

    def detach(self, node: int, reason: str) -> None:
        self._left[node] = reason
        if self.agents.pop(node, None) is None:
            return
        lane = self._lanes.pop(node, None)
        if lane is not None:
            lane.close()
        if self._events is not None:
            self._events.remove(node)
        gone = self._gone.pop(node, None)
        if gone is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_settle, gone, reason)

    @property
    def can_call_now(self) -> bool:
        return True

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        reply = self._via_lane(node, payload, timeout) if isinstance(payload, bytes) else None
        if reply is not None:
            return reply
        ref = self._send(node, payload)
        try:
            return ray.get(ref, timeout=timeout)
        except Exception as exc:
            raise self._explained(_failure(exc, node)) from None

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if isinstance(payload, bytes) and node in self._lanes:
            reply = await self._via_lane_async(node, payload, timeout)
            if reply is not None:
                return reply
        held = payload.handle if isinstance(payload, Shared) else None
        if isinstance(held, HeldShare):
            if node in self._lanes:
                reply = await asyncio.get_running_loop().run_in_executor(
                    self._sender(), self._via_lane, node, held.payload, timeout
                )
                if reply is not None:
                    return reply
            held = held.stored(self._stored)
        ref = self._send(node, payload if held is None else held)
        answer: asyncio.Future[Payload] = asyncio.wrap_future(ref.future())
        gone = self._gone_of(node)
        try:
            waited: set[asyncio.Future[Payload] | asyncio.Future[str]] = {answer, gone}
            done, _ = await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            answer.cancel()
            raise
        if answer in done:
            try:
                return answer.result()
            except Exception as exc:
                failure = _failure(exc, node)
                if isinstance(failure, NodeLost):
                    failure = await asyncio.get_running_loop().run_in_executor(None, self._explained, failure)
                raise failure from None
        answer.cancel()
        if gone in done:
            raise NodeLost(node, gone.result())
        raise NoReply(node, "no answer in time")

    async def share(self, payload: Payload | bytearray) -> Shared:
        """``payload`` held here for the lanes (``share_by_lanes``, a pool of up to
        ``LANE_SHARE_NODES`` nodes with lanes), else stored once in Ray's object store."""
        if self._share_by_lanes and self._lanes and len(self.agents) <= LANE_SHARE_NODES:
            return Shared(next(self._keys), HeldShare(payload))
        return Shared(next(self._keys), self._stored(payload))

    @staticmethod
    def _stored(payload: Payload | bytearray) -> ObjectRef[object]:
        """``payload`` put in Ray's object store. A pickle of ``OUT_OF_BAND_BYTES`` or
        more, and every out-of-band buffer of one, go in as out-of-band buffers, so each
        node's agent unpickles it where it lies in the store (``wire.Received``) instead of
        copying it out first (Ray would copy a ``bytes`` buffer into the pickle, and
        rebuild a ``bytearray`` one by copying it out)."""
        if isinstance(payload, (bytes, bytearray)) and len(payload) >= OUT_OF_BAND_BYTES:
            return ray.put(pickle.PickleBuffer(payload))
        if isinstance(payload, tuple):
            header, buffers = payload
            return ray.put((header, [pickle.PickleBuffer(b) for b in buffers]))
        return ray.put(payload)

    def _sender(self) -> ThreadPoolExecutor:
        """The threads that send held payloads over the lanes, one per node at once."""
        if self._senders is None:
            self._senders = ThreadPoolExecutor(LANE_SHARE_NODES, thread_name_prefix="skyward-lane-share")
        return self._senders

    def unshare(self, shared: Shared) -> None:
        """Nothing to do: the object store frees a stored payload when its last reference
        goes, and a payload held for the lanes (``HeldShare``) goes with its ``Shared``."""

    def close(self) -> None:
        self._closing = True
        for lane in self._lanes.values():
            lane.close()
        if self._senders is not None:
            self._senders.shutdown(wait=False)
        if self._events is not None:
            self._events.stop()

    def _gone_of(self, node: int) -> asyncio.Future[str]:
        """A future of the loop that is set (to the reason) when ``node`` is detached."""
        gone = self._gone.get(node)
        if gone is None:
            gone = self._gone[node] = asyncio.get_running_loop().create_future()
        return gone

    def _agent(self, node: int) -> AgentHandle:
        agent = self.agents.get(node)
        if agent is None:
            raise NodeLost(node, self._left.get(node, f"node {node} is not part of the pool"))
        return agent

    def _send(self, node: int, payload: object) -> ObjectRef[Payload]:
        return self._agent(node).execute.remote(payload)

    def _via_lane(self, node: int, payload: Payload | bytearray, timeout: float | None) -> Payload | None:
        """The agent's reply through its lane (blocks), or None: send through Ray."""
        lane = self._lanes.get(node)
        if lane is None:
            return None
        try:
            return lane.call(payload, timeout)
        except LaneBroken as exc:
            if node in self._left:
                raise NodeLost(node, self._left[node]) from None
            self._await_replacement(node)
            raise self._explained(NodeLost(node, str(exc))) from None
        except TimeoutError:
            raise NoReply(node, "no answer in time") from None
        except LaneFailed as exc:
            raise Refused(node, str(exc)) from None

    async def _via_lane_async(self, node: int, payload: bytes, timeout: float | None) -> Payload | None:
        """``_via_lane`` on the loop, without a thread between (the relay's every call)."""
        lane = self._lanes.get(node)
        if lane is None:
            return None
        try:
            return await lane.call_async(payload, timeout)
        except LaneBroken as exc:
            if node in self._left:
                raise NodeLost(node, self._left[node]) from None
            failure = await asyncio.get_running_loop().run_in_executor(None, self._replaced, NodeLost(node, str(exc)))
            raise failure from None
        except TimeoutError:
            raise NoReply(node, "no answer in time") from None
        except LaneFailed as exc:
            raise Refused(node, str(exc)) from None

    def _replaced(self, failure: NodeLost) -> TransportError:
        """Once Ray has restarted the node's agent (bounded), ``failure`` explained."""
        self._await_replacement(failure.node)
        return self._explained(failure)

    def _explained(self, failure: TransportError) -> TransportError:
        """A lost node's failure with the cause of death its agent's note tells, if any."""
        if not isinstance(failure, NodeLost) or failure.node in self._left:
            return failure
        death = self._postmortem(failure.node)
        return failure if death is None else NodeLost(failure.node, death.cause, death.by_task)

    def _await_replacement(self, node: int) -> None:
        """After a lane broke, wait (bounded) until Ray has restarted the node's agent: the
        lane sees a death before Ray does, and a call sent through Ray in between would
        reach the dead agent and fail too. Then ask the new agent (through Ray, which
        authenticates it) where its lane listens: never dial the old address again, which
        another process may hold now."""
        deadline = time.monotonic() + REPLACEMENT_WAIT
        while not self._closing and node not in self._left and time.monotonic() < deadline:
            try:
                agent = self._agent(node)
                ray.get(agent.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
                address = ray.get(agent.lane_address.remote(), timeout=max(0.1, deadline - time.monotonic()))
            except Exception:  # still the dead agent, or restarting
                time.sleep(0.05)
                continue
            self._relearn_lane(node, address)
            return

    def _relearn_lane(self, node: int, address: str) -> None:
        """Node ``node``'s lane is at ``address`` now ("" for none)."""
        old = self._lanes.get(node)
        if old is not None and old.address == address:
            return
        if address:
            self._lanes[node] = LaneClient(address, self._lane_secret)
        else:
            self._lanes.pop(node, None)
        if old is not None:
            old.close()


def _settle(future: asyncio.Future[str], value: str) -> None:
    if not future.done():
        future.set_result(value)


def _failure(exc: BaseException, node: int) -> TransportError:
    if isinstance(exc, (asyncio.TimeoutError, GetTimeoutError)):
        return NoReply(node, "no answer in time")
    if isinstance(exc, RayActorError):
        return NodeLost(node, _first_line(exc))
    if isinstance(exc, RayTaskError):
        return Refused(node, _first_line(exc.cause if exc.cause is not None else exc))
    return Refused(node, f"{type(exc).__name__}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class RayEventSource:
    """Polls every agent's ``take_events`` (``agents[i]`` is node ``i``) on one thread and
    passes each encoded batch to ``sink(node, data)``; ``on_error`` gets a message when a
    node's stream ended. An agent being replaced after a crash is polled again once back;
    ``add`` and ``remove`` change the nodes polled (from any thread). The agents sample
    metrics only while ``wants_metrics()`` is true (looked at every ``LOOP_TICK``).
    ``stop`` wakes the agents' pending polls and a later source on the same agents (a
    kept pool's next script) resumes them, so its polls wait for events again."""

    def __init__(
        self,
        agents: Mapping[int, AgentHandle],
        sink: Callable[[int, bytes], None],
        on_error: Callable[[str], None],
        wants_metrics: Callable[[], bool] = lambda: True,
    ) -> None:
        self._agents = dict(agents)
        self._sink = sink
        self._on_error = on_error
        self._wants_metrics = wants_metrics
        self._sampling: bool | None = None  # what the agents were last told
        self._lock = threading.Lock()
        self._added: dict[int, AgentHandle] = {}
        self._removed: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="skyward-event-poll", daemon=True)
        self._thread.start()

    def add(self, node: int, agent: AgentHandle) -> None:
        """Poll ``agent`` as node ``node`` from now on."""
        with self._lock:
            self._removed.discard(node)
            self._added[node] = agent

    def remove(self, node: int) -> None:
        """Stop polling node ``node`` (what it still holds is dropped: it left)."""
        with self._lock:
            self._added.pop(node, None)
            self._removed.add(node)

    def stop(self) -> None:
        """Stop polling, then pass on what the agents still hold (bounded); returns once
        the agents were woken (a later source's resume comes after). The agents are woken
        first, so their pending polls answer at once and the poll thread passes those
        answers on and ends, instead of ending at its next tick."""
        self._stop.set()
        agents = list(self._agents.values())  # the poll thread changes the dict
        woken = [wake for agent in agents if (wake := _tell(agent.wake_events)) is not None]
        self._thread.join(STOP_TIMEOUT)
        self._changes({})
        takes: dict[ObjectRef[bytes], int] = {}
        for node, agent in self._agents.items():
            try:
                takes[agent.take_events.remote(0.0)] = node
            except Exception:
                continue
        deadline = time.monotonic() + STOP_TIMEOUT
        self._drain(takes)
        if woken:  # an agent's actor runs its calls on several threads, in no set order
            ray.wait(woken, num_returns=len(woken), timeout=max(0.0, deadline - time.monotonic()))

    def _changes(self, polls: dict[ObjectRef[bytes], int]) -> None:
        """Apply the nodes added and removed since the last call to ``polls``."""
        with self._lock:
            added, self._added = self._added, {}
            removed, self._removed = self._removed, set()
        for node in removed:
            self._agents.pop(node, None)
            for ref in [ref for ref, polled in polls.items() if polled == node]:
                del polls[ref]
        for node, agent in added.items():
            self._agents[node] = agent
            for ref in [ref for ref, polled in polls.items() if polled == node]:
                del polls[ref]
            if not self._stop.is_set():
                if self._sampling is not None:
                    _tell(agent.sample_metrics, self._sampling)
                polls[agent.take_events.remote(AGENT_HOLD)] = node

    def _follow_listeners(self) -> None:
        """Tell every agent to sample metrics or not, when that changed."""
        wanted = bool(self._wants_metrics())
        if wanted != self._sampling:
            self._sampling = wanted
            for agent in self._agents.values():
                _tell(agent.sample_metrics, wanted)

    def _loop(self) -> None:
        for agent in self._agents.values():  # the last source's stop woke them: wait in takes again
            _tell(agent.resume_events)
        polls = {agent.take_events.remote(AGENT_HOLD): node for node, agent in self._agents.items()}
        failures: dict[int, int] = {}
        retry_at: dict[int, float] = {}  # nodes whose agent is being replaced: poll again then
        while not self._stop.is_set():
            self._changes(polls)
            self._follow_listeners()
            now = time.monotonic()
            for node in [n for n, when in retry_at.items() if when <= now]:
                del retry_at[node]
                if node in self._agents:
                    polls[self._agents[node].take_events.remote(AGENT_HOLD)] = node
            wait = min([*retry_at.values(), now + LOOP_TICK]) - now
            if not polls:
                self._stop.wait(max(0.0, wait))
                continue
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=max(0.0, wait))
            for ref in ready:
                if ref not in polls:
                    continue
                node = polls.pop(ref)
                try:
                    self._sink(node, ray.get(ref))
                    if failures.get(node) and self._sampling is not None and node in self._agents:
                        _tell(self._agents[node].sample_metrics, self._sampling)  # a restarted agent samples
                    failures[node] = 0
                except Exception as exc:  # the agent crashed (and is being replaced) or is gone
                    if self._stop.is_set():
                        break
                    failures[node] = failures.get(node, 0) + 1
                    if failures[node] >= FAILURES_BEFORE_GIVING_UP:
                        self._on_error(f"the event stream of node {node} stopped: {exc}")
                    else:
                        retry_at[node] = time.monotonic() + min(0.05 * failures[node], 0.5)
                    continue
                if not self._stop.is_set() and node in self._agents:
                    polls[self._agents[node].take_events.remote(AGENT_HOLD)] = node
        self._drain(polls)

    def _drain(self, polls: dict[ObjectRef[bytes], int]) -> None:
        """Pass on what each of ``polls`` (a take of node ``polls[ref]``) answers, once
        ``stop`` woke the agents (within ``STOP_TIMEOUT``; a take that fails is skipped)."""
        deadline = time.monotonic() + STOP_TIMEOUT
        for ref, node in polls.items():
            try:
                self._sink(node, ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except Exception:
                continue


def _tell(method: RemoteMethod[P, None], *args: P.args, **kwargs: P.kwargs) -> ObjectRef[None] | None:
    """Call an agent's ``method`` without waiting for its answer; None for a dead handle
    (an agent being replaced is told what it must know when it is added back)."""
    try:
        return method.remote(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a dead handle
        return None
