"""What a pool costs while it runs: ``CostUpdate`` every ``interval`` seconds for a
priced cluster, and one ``CostFinal`` when it stops (a local pool's is $0)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyward.api.validation import check_number
from skyward.observe.events import CostFinal, CostUpdate

UPDATE_INTERVAL = 60.0


@dataclass(frozen=True, slots=True)
class Pricing:
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
    run on a daemon thread, only for a cluster with a price."""

    def __init__(self, pricing: Pricing, emit: Callable[[Any], None], interval: float = UPDATE_INTERVAL) -> None:
        self.pricing = pricing
        self._emit = emit
        self._interval = interval
        self._started: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CostMeter:
        """Start the clock; returns self."""
        self._started = time.monotonic()
        if self.pricing.hourly_rate > 0:
            self._thread = threading.Thread(target=self._run, name="skyward-cost", daemon=True)
            self._thread.start()
        return self

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
        seconds, p = self.elapsed(), self.pricing
        self._emit(CostFinal(p.cost(seconds), seconds, p.hourly_rate, p.spot_count, p.ondemand_count, p.savings(seconds)))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            seconds, p = self.elapsed(), self.pricing
            self._emit(
                CostUpdate(seconds, p.cost(seconds), p.hourly_rate, p.spot_count, p.ondemand_count, p.savings(seconds))
            )
