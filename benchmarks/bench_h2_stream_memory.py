"""H2 — peak client memory of a streamed map of 1 GiB.

`for r in pool.map(f, range(1024), stream=True)` where each item returns 1 MiB, read
and dropped one by one, with a pause every 128 results (a slow reader). A thread samples
the client's resident set size every 5 ms; the row is the peak growth over the RSS
before the map. Before issue 11 the client kept every result and peaked at the whole
1 GiB; now it holds a bounded window of chunks sized to about 4 MiB of results each.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row
from benchmarks.isolate import measured

GROUP = "H2"
TITLE = "H2 — peak client memory of a streamed map of 1 GiB"
ITEMS = 1024
MB = 1024**2


def run(quick: bool = False) -> list[Row]:
    """One row: the peak RSS growth in MiB (median over runs)."""
    return [measured(GROUP, "skyward pool.map(stream=True), 1,024 × 1 MiB", streamed_peak, 1 if quick else 3,
                     unit="MiB")]


def streamed_peak(runs: int) -> dict[str, Any]:
    import psutil

    process = psutil.Process()
    samples, seconds = [], []
    with engines.skyward_pool() as pool:
        list(pool.map(payloads.megabyte, range(8), stream=True))  # warm-up
        for _ in range(runs):
            baseline = process.memory_info().rss
            peak = [baseline]
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], process.memory_info().rss)
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            started, total = time.perf_counter(), 0
            for index, block in enumerate(pool.map(payloads.megabyte, range(ITEMS), stream=True)):
                total += len(block)
                if index % 128 == 0:
                    time.sleep(0.2)
            seconds.append(time.perf_counter() - started)
            stop.set()
            sampler.join()
            assert total == ITEMS * MB
            samples.append((peak[0] - baseline) / MB)
    note = f"{ITEMS * MB / 1024**3:.0f} GiB streamed in {sorted(seconds)[len(seconds) // 2]:.1f} s"
    return {"samples": samples, "note": note}
