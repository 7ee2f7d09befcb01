"""What a pool costs while it runs: ``CostUpdate`` every ``interval`` seconds for a
priced cluster, and one ``CostFinal`` when it stops (a local pool's is $0)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from msgspec import Struct

from skyward.core.validation import check_number
from skyward.observe.events import CostFinal, CostUpdate, Event

UPDATE_INTERVAL = 60.0


class Pricing(Struct, frozen=True):
    """A launched cluster's price: ``hourly_rate`` is what its nodes cost together,
    ``ondemand_rate`` what the same nodes would cost on demand (None: the same).
    A launched ``Cluster`` derives it from its node handles."""

    hourly_rate: float = 0.0
    ondemand_rate: float | None = None
    spot_count: int = 0
    ondemand_count: int = 0

    def __post_init__(self) -> None:
        check_number("Pricing", "hourly_rate", self.hourly_rate, minimum=0)
        check_number("Pricing", "ondemand_rate", self.ondemand_rate, minimum=0, optional=True)
        check_number("Pricing", "spot_count", self.spot_count, minimum=0, integer=True)
        check_number("Pricing", "ondemand_count", self.ondemand_count, minimum=0, integer=True)

    def cost(self, seconds: float) -> float:
        """Dollars for ``seconds`` of running."""
        return self.hourly_rate * seconds / 3600

    def savings(self, seconds: float) -> float:
        """Dollars saved against on-demand prices over ``seconds``."""
        ondemand = self.hourly_rate if self.ondemand_rate is None else self.ondemand_rate
        return max(0.0, (ondemand - self.hourly_rate) * seconds / 3600)


class CostMeter:
    """Emits a pool's cost events from ``start()`` to ``stop()``; the periodic updates
    run on a daemon thread while the cluster has a price. ``reprice`` follows nodes
    joining and leaving: what was spent so far stays counted at the old price."""

    def __init__(self, pricing: Pricing, emit: Callable[[Event], None], interval: float = UPDATE_INTERVAL) -> None:
        self.pricing = pricing
        self._emit = emit
        self._interval = interval
        self._started: float | None = None
        self._since = 0.0
        self._spent = 0.0
        self._saved = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CostMeter:
        """Start the clock; returns self."""
        self._started = self._since = time.monotonic()
        self._start_updates()
        return self

    def reprice(self, pricing: Pricing) -> None:
        """The cluster's nodes changed: from now on it costs ``pricing``."""
        with self._lock:
            now = time.monotonic()
            self._spent, self._saved = self._totals(now)
            self._since = now
            self.pricing = pricing
        if self._started is not None:
            self._start_updates()

    def elapsed(self) -> float:
        """Seconds since ``start()`` (0 before)."""
        return 0.0 if self._started is None else time.monotonic() - self._started

    def stop(self) -> None:
        """Stop the updates and emit ``CostFinal`` (once; nothing if never started)."""
        if self._started is None or self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._emit(CostFinal(*self._figures()))

    def _start_updates(self) -> None:
        if self._thread is None and self.pricing.hourly_rate > 0 and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="skyward-cost", daemon=True)
            self._thread.start()

    def _totals(self, now: float) -> tuple[float, float]:
        """Dollars spent and saved up to ``now`` (call holding the lock)."""
        seconds = now - self._since
        return self._spent + self.pricing.cost(seconds), self._saved + self.pricing.savings(seconds)

    def _figures(self) -> tuple[float, float, float, int, int, float]:
        with self._lock:
            now = time.monotonic()
            spent, saved = self._totals(now)
            p = self.pricing
        elapsed = 0.0 if self._started is None else now - self._started
        return spent, elapsed, p.hourly_rate, p.spot_count, p.ondemand_count, saved

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            spent, seconds, rate, spot, ondemand, saved = self._figures()
            self._emit(CostUpdate(seconds, spent, rate, spot, ondemand, saved))
