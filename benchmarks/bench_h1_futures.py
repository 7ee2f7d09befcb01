"""H1 — per-task cost of many `>` futures.

`[f(i) > pool for i in range(N)]` then every `.result()`, on a 4-node pool, with `f` an
identity function defined in the script (`__main__`) as users write it, timed from the
first submit to the last result and divided by N: 1,000 futures at once (median of
several runs) against 50,000 at once, on the same pool. A dispatch path with any cost
that grows with the number of waiting tasks (a scan of the waiters per grant, per-task
bookkeeping in a list) shows as a higher per-task cost at 50,000; issue 11 found
0.58 ms at 1k growing to 4.0 ms at 16k.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row
from benchmarks.isolate import measured

GROUP = "H1"
TITLE = "H1 — per-task cost of 1,000 vs 50,000 `>` futures"
SMALL, LARGE = 1_000, 50_000


def run(quick: bool = False) -> list[Row]:
    """Both sizes in one fresh interpreter (the same pool), one row each, in seconds per task."""
    outcome = measured(GROUP, "skyward futures", futures_per_task, 3 if quick else 7, 1 if quick else 2)
    if not outcome["runs"]:
        return [outcome]
    rows = []
    for size in (SMALL, LARGE):
        samples = outcome["facts"][str(size)]
        rows.append({
            **outcome, "subject": f"skyward {size:,} `>` futures (per task)",
            "median_s": sorted(samples)[len(samples) // 2], "min_s": min(samples), "max_s": max(samples),
            "runs": len(samples), "facts": {"per_task_s": samples},
        })
    return rows


def futures_per_task(small_runs: int, large_runs: int) -> dict[str, Any]:
    """Seconds per task for ``SMALL`` and ``LARGE`` futures at once."""
    import skyward as sky

    task = sky.function(payloads.in_script("identity"))
    with engines.skyward_pool() as pool:

        def per_task(count: int) -> float:
            started = time.perf_counter()
            futures = [task(i) > pool for i in range(count)]
            results = [future.result() for future in futures]
            elapsed = time.perf_counter() - started
            assert results == list(range(count))
            return elapsed / count

        per_task(SMALL)  # warm-up
        small = [per_task(SMALL) for _ in range(small_runs)]
        large = [per_task(LARGE) for _ in range(large_runs)]
    return {"samples": small + large, "facts": {str(SMALL): small, str(LARGE): large}}
