"""B5 — idle memory of 4 workers.

Each run is a fresh interpreter that starts the engine as in B4, waits `SETTLE` seconds
with nothing to do, then sums the proportional set size (PSS, so shared pages are
counted once) over its own process and every descendant: for skyward and Ray that
includes gcs_server, raylet, the agents Ray starts and the worker processes. The note
lists the largest processes of the median run.
"""

from __future__ import annotations

import statistics
import time

from benchmarks import engines
from benchmarks.bench_b4_startup import SUBJECTS, interleaved
from benchmarks.common import Row, failed_row, pss_by_process, row
from benchmarks.isolate import SubjectFailed

GROUP = "B5"
TITLE = "B5 — idle memory (PSS) of 4 workers"
SETTLE = 2.0
MB = 1024**2


def run(quick: bool = False) -> list[Row]:
    """One row per engine, in MB."""
    runs = 1 if quick else 2
    outcomes = interleaved(idle_memory, runs)
    rows: list[Row] = []
    for engine, subject in SUBJECTS.items():
        results = outcomes[engine]
        if isinstance(results, SubjectFailed):
            rows.append(failed_row(GROUP, subject, results))
            continue
        totals = [sum(r.values()) / MB for r in results]
        median_run = results[totals.index(statistics.median_low(totals))]
        rows.append(row(GROUP, subject, totals, _largest(median_run), unit="MiB",
                        facts={"by_process_mb": {k: v / MB for k, v in median_run.items()}}))
    return rows


def idle_memory(engine: str) -> dict[str, int]:
    """PSS in bytes per process name of this process tree, with ``engine`` started and idle."""
    engines.import_engine(engine)
    handle = engines.start(engine)
    try:
        time.sleep(SETTLE)
        return pss_by_process()
    finally:
        engines.stop(engine, handle)


def _largest(by_name: dict[str, int], count: int = 4) -> str:
    top = sorted(by_name.items(), key=lambda item: item[1], reverse=True)[:count]
    return ", ".join(f"{name} {size / MB:.0f}" for name, size in top)
