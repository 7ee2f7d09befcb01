"""B5 — idle memory and CPU of 4 workers.

Each run is a fresh interpreter that starts the engine as in B4, waits `SETTLE` seconds
with nothing to do, then sums the proportional set size (PSS, so shared pages are
counted once) over its own process and every descendant: for skyward and Ray that
includes gcs_server, raylet, the agents Ray starts and the worker processes. The note
lists the largest processes of the median run. Then, for `IDLE_WINDOW` seconds, the
same tree's CPU time (user + system) is summed: the idle row is that time as a share of
one core.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psutil

from benchmarks import engines
from benchmarks.bench_b4_startup import SUBJECTS, interleaved
from benchmarks.common import Row, failed_row, process_tree, pss_by_process, row
from benchmarks.isolate import SubjectFailed

GROUP = "B5"
TITLE = "B5 — idle memory (PSS) and CPU of 4 workers"
SETTLE = 2.0
IDLE_WINDOW = 5.0
"""Seconds over which the idle tree's CPU use is measured, after ``SETTLE``."""
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
        totals = [sum(r["pss"].values()) / MB for r in results]
        median_run = results[totals.index(statistics.median_low(totals))]["pss"]
        rows.append(row(GROUP, subject, totals, _largest(median_run), unit="MiB",
                        facts={"by_process_mb": {k: v / MB for k, v in median_run.items()}}))
        rows.append(row(GROUP, f"{subject} idle CPU", [100 * r["cpu"] for r in results],
                        f"% of one core over {IDLE_WINDOW:.0f} s", unit="%", metric="cpu"))
    return rows


def idle_memory(engine: str) -> dict[str, Any]:
    """With ``engine`` started and idle: PSS in bytes per process name of this process
    tree ("pss"), and the tree's CPU use as a share of one core ("cpu")."""
    engines.import_engine(engine)
    handle = engines.start(engine)
    try:
        time.sleep(SETTLE)
        pss = pss_by_process()
        before, started = _cpu_seconds(), time.monotonic()
        time.sleep(IDLE_WINDOW)
        cpu = (_cpu_seconds() - before) / (time.monotonic() - started)
        return {"pss": pss, "cpu": max(cpu, 0.0)}
    finally:
        engines.stop(engine, handle)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process tree's live processes."""
    total = 0.0
    for process in process_tree():
        try:
            times = process.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        total += times.user + times.system
    return total


def _largest(by_name: dict[str, int], count: int = 4) -> str:
    top = sorted(by_name.items(), key=lambda item: item[1], reverse=True)[:count]
    return ", ".join(f"{name} {size / MB:.0f}" for name, size in top)
