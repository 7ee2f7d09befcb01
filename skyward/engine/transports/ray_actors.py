"""``RayTransport``: node agents are Ray actors this process can call (a local pool, an
attached Ray cluster, and the head relay of a remote pool).

A call goes through the agent's Unix-socket lane when it has one (see ``lane``; local
agents only), else as a Ray actor call; a broadcast's payload is stored once in Ray's
object store. ``RayEventSource`` keeps a long poll open on every agent's outbox, on one
thread, and hands each encoded batch to a sink as it arrives.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from skyward.engine.events import EventBatch
from skyward.engine.transport import NodeLost, NoReply, Refused, Shared, TransportError
from skyward.engine.transports.lane import LaneBroken, LaneClient, LaneFailed
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventFeed

POLL_WAIT = 0.5
FAILURES_BEFORE_GIVING_UP = 20
STOP_TIMEOUT = 5.0
REPLACEMENT_WAIT = 60.0


class RayTransport:
    """Calls ``agents[i]`` (node ``i``); ``lanes[i]`` is its lane path or "" for none."""

    def __init__(
        self,
        agents: Sequence[Any],
        lanes: Sequence[str] = (),
        lane_threads: int = 1,
        postmortem: Callable[[int], str | None] = lambda node: None,
    ) -> None:
        self.agents = list(agents)
        self._postmortem = postmortem
        self._lanes = [LaneClient(path) if path else None for path in lanes] or [None] * len(self.agents)
        # lane calls block, so the loop hands them to these threads (one per slot in use)
        self._lane_threads = ThreadPoolExecutor(max(1, lane_threads), "skyward-lane")
        self._events: RayEventSource | None = None
        self._keys = itertools.count()
        self._closing = False

    @property
    def nodes(self) -> int:
        return len(self.agents)

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventFeed) -> None:
        self._events = RayEventSource(
            self.agents, lambda node, data: feed.submit(node, EventBatch.decode(data)), feed.report
        )

    @property
    def can_call_now(self) -> bool:
        return True

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        reply = self._via_lane(node, payload, timeout)
        if reply is not None:
            return reply
        ref = self._send(node, payload)
        try:
            return ray.get(ref, timeout=timeout)
        except Exception as exc:
            raise self._explained(_failure(exc, node)) from None

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if isinstance(payload, bytes) and self._lanes[node] is not None:
            reply = await asyncio.get_running_loop().run_in_executor(
                self._lane_threads, self._via_lane, node, payload, timeout
            )
            if reply is not None:
                return reply
        ref = self._send(node, payload.handle if isinstance(payload, Shared) else payload)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)
        except Exception as exc:
            raise self._explained(_failure(exc, node)) from None

    async def share(self, payload: Payload) -> Shared:
        return Shared(next(self._keys), ray.put(payload))

    def unshare(self, shared: Shared) -> None:
        """Nothing to do: the object store frees the payload when its last reference goes."""

    def close(self) -> None:
        self._closing = True
        for lane in self._lanes:
            if lane is not None:
                lane.close()
        self._lane_threads.shutdown(wait=False)
        if self._events is not None:
            self._events.stop()

    def _send(self, node: int, payload: Any) -> Any:
        return self.agents[node].execute.remote(payload)

    def _via_lane(self, node: int, payload: Payload, timeout: float | None) -> Payload | None:
        """The agent's reply through its lane (blocks), or None: send through Ray."""
        lane = self._lanes[node] if isinstance(payload, bytes) else None
        if lane is None:
            return None
        try:
            return lane.call(payload, timeout)
        except LaneBroken as exc:
            self._await_replacement(node)
            raise self._explained(NodeLost(node, str(exc))) from None
        except TimeoutError:
            raise NoReply(node, "no answer in time") from None
        except LaneFailed as exc:
            raise Refused(node, str(exc)) from None

    def _explained(self, failure: TransportError) -> TransportError:
        """A lost node's failure with the cause of death its agent's note tells, if any."""
        if not isinstance(failure, NodeLost):
            return failure
        cause = self._postmortem(failure.node)
        return failure if cause is None else NodeLost(failure.node, cause)

    def _await_replacement(self, node: int) -> None:
        """After a lane broke, wait (bounded) until Ray has restarted the node's agent: the
        lane sees a death before Ray does, and a call sent through Ray in between would
        reach the dead agent and fail too."""
        deadline = time.monotonic() + REPLACEMENT_WAIT
        while not self._closing and time.monotonic() < deadline:
            try:
                ray.get(self.agents[node].ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
                return
            except Exception:  # still the dead agent, or restarting
                time.sleep(0.05)


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
    node's stream ended. An agent being replaced after a crash is polled again once back."""

    def __init__(
        self, agents: Sequence[Any], sink: Callable[[int, bytes], None], on_error: Callable[[str], None]
    ) -> None:
        self._agents = list(agents)
        self._sink = sink
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="skyward-event-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, then pass on what the agents still hold (bounded)."""
        self._stop.set()
        for agent in self._agents:
            try:
                agent.wake_events.remote()
            except Exception:
                pass
        self._thread.join(STOP_TIMEOUT)
        refs = {}
        for node, agent in enumerate(self._agents):
            try:
                refs[node] = agent.take_events.remote(0.0)
            except Exception:
                continue
        deadline = time.monotonic() + STOP_TIMEOUT
        for node, ref in refs.items():
            try:
                self._sink(node, ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except Exception:
                continue

    def _loop(self) -> None:
        polls = {agent.take_events.remote(POLL_WAIT): node for node, agent in enumerate(self._agents)}
        failures = [0] * len(self._agents)
        retry_at: dict[int, float] = {}  # nodes whose agent is being replaced: poll again then
        while (polls or retry_at) and not self._stop.is_set():
            now = time.monotonic()
            for node in [n for n, when in retry_at.items() if when <= now]:
                del retry_at[node]
                polls[self._agents[node].take_events.remote(POLL_WAIT)] = node
            wait = min(retry_at.values(), default=now + POLL_WAIT + 30) - now
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=max(0.0, wait)) if polls else ([], [])
            if not polls:
                time.sleep(max(0.0, wait))
            for ref in ready:
                node = polls.pop(ref)
                try:
                    self._sink(node, ray.get(ref))
                    failures[node] = 0
                except Exception as exc:  # the agent crashed (and is being replaced) or is gone
                    if self._stop.is_set():
                        return
                    failures[node] += 1
                    if failures[node] >= FAILURES_BEFORE_GIVING_UP:
                        self._on_error(f"the event stream of node {node} stopped: {exc}")
                    else:
                        retry_at[node] = time.monotonic() + min(0.05 * failures[node], 0.5)
                    continue
                if not self._stop.is_set():
                    polls[self._agents[node].take_events.remote(POLL_WAIT)] = node
