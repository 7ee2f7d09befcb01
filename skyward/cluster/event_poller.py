"""The client's side of the nodes' outboxes: one thread, ``skyward-events``, keeps a long
poll open on every agent's ``take_events`` and hands what arrives to the pool's handlers,
in order for each node."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray

POLL_WAIT = 0.5
FAILURES_BEFORE_GIVING_UP = 20
STOP_TIMEOUT = 5.0


class EventPoller:
    """Takes events from every agent (``agents[i]`` is node ``i``) and passes each to
    ``deliver``; ``on_error`` gets a message when events were dropped or a node's stream
    ended. An agent that is being replaced after a crash is polled again once it is back."""

    def __init__(
        self, agents: Sequence[Any], deliver: Callable[[Any], None], on_error: Callable[[str], None]
    ) -> None:
        self._agents = list(agents)
        self._deliver = deliver
        self._on_error = on_error
        self._stop = threading.Event()
        self._delivered = [0] * len(self._agents)
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="skyward-events", daemon=True)
        self._thread.start()

    def wait_delivered(self, node: int, count: int, timeout: float = 2.0) -> None:
        """Block until the first ``count`` events of ``node`` were delivered (or timeout)."""
        with self._progress:
            self._progress.wait_for(lambda: self._delivered[node] >= count or self._stop.is_set(), timeout)

    def stop(self) -> None:
        """Stop polling, then deliver what the agents still hold."""
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
                self._receive(node, ray.get(ref, timeout=max(0.0, deadline - time.monotonic())))
            except Exception:
                continue

    def _loop(self) -> None:
        polls = {agent.take_events.remote(POLL_WAIT): node for node, agent in enumerate(self._agents)}
        failures = [0] * len(self._agents)
        while polls and not self._stop.is_set():
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=POLL_WAIT + 30)
            for ref in ready:
                node = polls.pop(ref)
                try:
                    self._receive(node, ray.get(ref))
                    failures[node] = 0
                except Exception as exc:  # the agent crashed (and is being replaced) or is gone
                    if self._stop.is_set():
                        return
                    failures[node] += 1
                    if failures[node] >= FAILURES_BEFORE_GIVING_UP:
                        self._on_error(f"the event stream of node {node} stopped: {exc}")
                        continue
                    time.sleep(min(0.05 * failures[node], 0.5))
                if not self._stop.is_set():
                    polls[self._agents[node].take_events.remote(POLL_WAIT)] = node

    def _receive(self, node: int, taken: tuple[list[Any], int, int]) -> None:
        events, dropped, published = taken
        if dropped:
            self._on_error(f"{dropped} events of node {node} were dropped because the client fell behind")
        with self._progress:
            for event in events:
                self._deliver(event)
            self._delivered[node] = published
            self._progress.notify_all()
