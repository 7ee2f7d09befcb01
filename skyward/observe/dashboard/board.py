"""``Board``: one pool as the dashboard shows it, folded from the pool's events.

Events come from any thread (the pool's event bus, or the pool daemon's relay of a kept
pool); ``snapshot`` is what the page draws, summarised: at most ``NODE_ROWS`` node rows
(the nodes in trouble and the busiest first, the rest counted by state), so a pool of a
thousand nodes stays one screen. The node table, task counts, maps and cost come from a
``PoolView`` (``observe.view``, what the console draws from); the board adds what a page
that stays open needs: the latest events and each node's latest output lines, numbered
so a stream sends each once (``events_after``, ``log_after``), throughput, each map's
rate and ETA, and the cost so far between the pool's ``CostUpdate`` events.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from skyward.core.codec import load_payload
from skyward.observe import events
from skyward.observe.cost import Pricing
from skyward.observe.describe import describe
from skyward.observe.view import NodeState, PoolView, shown_nodes

NODE_ROWS = 25
"""Node rows a snapshot shows at most; the others are counted by state."""
EVENT_LINES = 300
"""Events a board keeps for a page that opens later."""
LOG_LINES = 300
"""Output lines a board keeps per node."""
LINE_CHARS = 2000
"""Characters of one output line kept (the rest is cut)."""
THROUGHPUT_WINDOW = 30.0
"""Seconds over which tasks per second are counted."""
METRICS = ("cpu", "memory", "gpu", "gpu_memory")
QUIET = (events.Metric, events.Log, events.TaskStarted, events.CostUpdate, events.BroadcastStarted)
"""Events the event list leaves out (too many; they show elsewhere on the page)."""


@dataclass(frozen=True, slots=True)
class Line:
    """One numbered line: an event (``level`` info, warning or error) or a node's output
    (``level`` stdout or stderr)."""

    seq: int
    time: float
    level: str
    text: str

    def json(self) -> dict[str, object]:
        return {"seq": self.seq, "time": round(self.time, 3), "level": self.level, "text": self.text}


class Board:
    """One pool (see the module): ``apply`` its events from any thread, read ``snapshot``,
    ``events_after`` and ``log_after``. ``version`` grows with every change the page
    shows; ``watchers`` counts the pages following it (``watch``)."""

    def __init__(self, name: str = "", provider: str = "") -> None:
        self.lock = threading.RLock()
        self.view = PoolView()
        self.view.pool, self.view.provider = name, provider
        self.version = 0
        self.extra: dict[str, object] = {}
        """What the server that holds the board adds (the pool daemon: holder, idle, keep_alive)."""
        self._seq = itertools.count(1)
        self._events: collections.deque[Line] = collections.deque(maxlen=EVENT_LINES)
        self._logs: dict[int, collections.deque[Line]] = {}
        self._completions: collections.deque[float] = collections.deque()
        self._first_completion: float | None = None
        self._running: dict[str, tuple[str, int]] = {}
        """Task id: (function name, items) of the tasks running now."""
        self._rates: dict[str, tuple[float, int, float | None]] = {}
        """A map's (first seen, items then, items per second since)."""
        self._prices: dict[int, float] = {}
        self._spent = 0.0
        self._priced_since: float | None = None
        self._watchers = 0
        self._on_watch: list[Callable[[bool], None]] = []

    # --- taking events in -------------------------------------------------------------

    def apply(self, event: object) -> None:
        """Fold one event in (objects that are not skyward events are ignored)."""
        if not isinstance(event, events.Event):
            return
        with self.lock:
            self.view.apply(event)
            self._take(event)
            self.version += 1

    def apply_all(self, batch: list[events.Event]) -> None:
        """``apply`` each of ``batch``, in order."""
        with self.lock:
            for event in batch:
                self.apply(event)

    def observed(self, batch: bytes) -> None:
        """Apply an encoded ``EventBatch`` of what the pool's client observed (the pool
        daemon gets them from the script holding a kept pool). A batch that cannot be
        read is noted as an error event."""
        try:
            decoded: object = load_payload(batch)  # pickled by this user's script, which proved the pool's secret
            taken = list(decoded.events)  # type: ignore[attr-defined]  # an EventBatch (engine.events)
        except Exception as exc:  # noqa: BLE001 - noted; the pool goes on
            self.note(f"the script's events could not be read: {type(exc).__name__}: {exc}", "error")
            return
        self.apply_all([event for event in taken if isinstance(event, events.Event)])

    def note(self, text: str, level: str = "info") -> None:
        """An event line of the server's own (the pool daemon's: adopted, idle, ...)."""
        with self.lock:
            self._events.append(Line(next(self._seq), time.time(), level, text))
            self.version += 1

    def _take(self, event: events.Event) -> None:
        if isinstance(event, events.Log):
            lines = self._logs.setdefault(event.node, collections.deque(maxlen=LOG_LINES))
            lines.append(Line(next(self._seq), event.timestamp, event.stream, event.line[:LINE_CHARS]))
        elif isinstance(event, events.TaskStarted):
            self._running[event.task_id] = (event.name, event.items or 1)
        elif isinstance(event, events.TaskCompleted):
            self._running.pop(event.task_id, None)
            self._completions.append(event.timestamp)
            if self._first_completion is None:
                self._first_completion = event.timestamp
        elif isinstance(event, events.Progress):
            self._progress(event)
        elif isinstance(event, events.InstanceProvisioned):
            price = event.price_spot if event.spot and event.price_spot is not None else event.price_on_demand
            if price is not None:
                self._price(event.node, price, event.timestamp)
        elif isinstance(event, events.InstanceDestroyed) and event.node in self._prices:
            self._price(event.node, None, event.timestamp)
        if not isinstance(event, QUIET) and not (isinstance(event, events.Progress) and not event.finished) and not (
            isinstance(event, events.TaskCompleted) and event.error is None
        ):
            when = getattr(event, "timestamp", None)
            stamp = when if isinstance(when, float) else time.time()
            self._events.append(Line(next(self._seq), stamp, _level(event), describe(event)))

    def _progress(self, event: events.Progress) -> None:
        settled = event.done + event.failed
        first = self._rates.get(event.batch_id)
        if first is None:
            self._rates[event.batch_id] = (event.timestamp, settled, None)
            return
        since, then, _ = first
        elapsed = event.timestamp - since
        rate = (settled - then) / elapsed if elapsed > 0 and settled > then else None
        self._rates[event.batch_id] = (since, then, rate)
        for stale in [key for key in self._rates if key not in self.view.batches]:
            del self._rates[stale]

    def _price(self, node: int, price: float | None, now: float) -> None:
        """Node ``node`` costs ``price`` per hour from ``now`` (None: nothing any more)."""
        if self._priced_since is not None:
            self._spent += Pricing(sum(self._prices.values())).cost(max(0.0, now - self._priced_since))
        if price is None:
            self._prices.pop(node, None)
        else:
            self._prices[node] = price
        self._priced_since = now

    # --- who watches ------------------------------------------------------------------

    def on_watch(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        """Call ``listener(True)`` when the first page starts following the board and
        ``listener(False)`` when the last one stops (the pool daemon has the nodes sample
        their metrics meanwhile); returns a function that stops calling it."""
        with self.lock:
            self._on_watch.append(listener)

        def forget() -> None:
            with self.lock:
                if listener in self._on_watch:
                    self._on_watch.remove(listener)

        return forget

    def watch(self, on: bool) -> None:
        """A page started (``on``) or stopped following the board."""
        with self.lock:
            before = self._watchers > 0
            self._watchers = max(0, self._watchers + (1 if on else -1))
            now = self._watchers > 0
            listeners = list(self._on_watch) if now != before else []
        for listener in listeners:
            try:
                listener(now)
            except Exception:  # noqa: BLE001, S110 - a listener's failure must not break the page
                pass

    @property
    def watched(self) -> bool:
        with self.lock:
            return self._watchers > 0

    # --- reading ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.view.pool

    def events_after(self, seq: int) -> list[dict[str, object]]:
        """The events kept with a number above ``seq``, oldest first."""
        with self.lock:
            return [line.json() for line in self._events if line.seq > seq]

    def log_after(self, node: int, seq: int) -> list[dict[str, object]]:
        """Node ``node``'s output lines kept with a number above ``seq``, oldest first."""
        with self.lock:
            return [line.json() for line in self._logs.get(node, ()) if line.seq > seq]

    def snapshot(self, rows: int = NODE_ROWS, now: float | None = None) -> dict[str, object]:
        """What the page draws of the pool now (see the module)."""
        now = time.time() if now is None else now
        with self.lock:
            view = self.view
            nodes = list(view.nodes.values())
            states = collections.Counter(node.status for node in nodes)
            shown = shown_nodes(nodes, rows)
            running = sum(len(node.running) for node in nodes)
            return {
                "name": view.pool,
                "provider": view.provider,
                "status": view.status,
                "elapsed": round(view.elapsed(), 1),
                "wanted": view.wanted,
                "node_count": len(nodes),
                "states": dict(sorted(states.items())),
                "means": {
                    name: round(sum(values) / len(values), 1)
                    for name in METRICS
                    if (values := [node.metrics[name] for node in nodes if name in node.metrics])
                },
                "nodes": [_node(node) for node in shown],
                "nodes_hidden": len(nodes) - len(shown),
                "tasks": {
                    "running": running,
                    "queued": self._queued(),
                    "done": view.tasks - view.failures - view.cancelled,
                    "failed": view.failures,
                    "cancelled": view.cancelled,
                    "per_second": self._throughput(now),
                },
                "maps": [self._batch(batch) for batch in view.batches.values()],
                "cost": self._cost(now),
                "logs": sorted(node for node, lines in self._logs.items() if lines),
                "version": self.version,
                **self.extra,
            }

    def _queued(self) -> int:
        """Items of the batches under way that no node runs yet."""
        queued = 0
        for batch in self.view.batches.values():
            if batch.finished:
                continue
            under_way = sum(items for name, items in self._running.values() if name == batch.name)
            queued += max(0, batch.total - batch.done - batch.failed - under_way)
        return queued

    def _throughput(self, now: float) -> float:
        """Tasks finished per second over the last ``THROUGHPUT_WINDOW`` seconds."""
        while self._completions and self._completions[0] < now - THROUGHPUT_WINDOW:
            self._completions.popleft()
        if not self._completions or self._first_completion is None:
            return 0.0
        span = min(THROUGHPUT_WINDOW, max(1.0, now - self._first_completion))
        return round(len(self._completions) / span, 2)

    def _batch(self, batch: events.Progress) -> dict[str, object]:
        rate = self._rates.get(batch.batch_id, (0.0, 0, None))[2]
        left = batch.total - batch.done - batch.failed
        eta = 0.0 if batch.finished or left <= 0 else (left / rate if rate else None)
        return {
            "id": batch.batch_id, "kind": batch.kind, "name": batch.name, "done": batch.done, "total": batch.total,
            "failed": batch.failed, "finished": batch.finished, "cancelled": batch.cancelled,
            "per_second": round(rate, 2) if rate else None,
            "eta": None if eta is None or math.isinf(eta) else round(eta, 1),
        }

    def _cost(self, now: float) -> dict[str, object] | None:
        """Dollars so far and per hour; None where the pool has no prices (a local pool)."""
        cost = self.view.cost
        if isinstance(cost, events.CostFinal) and (cost.hourly_rate > 0 or self._prices):
            return {"so_far": round(cost.total_cost, 6), "hourly": cost.hourly_rate, "final": True}
        rate = sum(self._prices.values())
        if isinstance(cost, events.CostUpdate) and cost.hourly_rate > 0:
            so_far = cost.accumulated_cost + Pricing(cost.hourly_rate).cost(max(0.0, now - cost.timestamp))
            return {"so_far": round(so_far, 6), "hourly": cost.hourly_rate, "final": False}
        if self._priced_since is None or (not self._prices and not self._spent):
            return None
        so_far = self._spent + Pricing(rate).cost(max(0.0, now - self._priced_since))
        return {"so_far": round(so_far, 6), "hourly": round(rate, 6), "final": False}


def _level(event: events.Event) -> str:
    if isinstance(event, events.Error):
        return "error"
    if isinstance(event, (events.InstancePreempted, events.InstanceReplaced)):
        return "warning"
    if isinstance(event, events.TaskCompleted) and event.error is not None and not event.cancelled:
        return "warning"
    if isinstance(event, events.Progress) and event.failed:
        return "warning"
    return "info"


def _node(node: NodeState) -> dict[str, object]:
    return {
        "node": node.node,
        "status": node.status,
        **{name: round(node.metrics[name], 1) if name in node.metrics else None for name in METRICS},
        "running": sorted(set(node.running.values())),
        "done": node.done,
        "failed": node.failed,
    }
