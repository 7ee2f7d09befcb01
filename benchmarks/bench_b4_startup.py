"""B4 — start from nothing to 4 workers ready, and shut down.

Each run is a fresh interpreter, the engines taking turns run by run. The engine's
modules are imported first (their import time is reported in the note, not counted);
then the clock runs until each of the 4 workers has answered one call: skyward
`Compute(nodes=4)` opened plus one broadcast, `ray.init` plus 4 actors each answering, a
Dask LocalCluster of 4 worker processes plus `client.run`, and a ProcessPoolExecutor
whose 4 workers each ran a submit. Shutdown is timed from the call that stops the
engine until it returns; the note says whether any process the engine started was still
alive then.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import engines
from benchmarks.common import Row, failed_row, process_tree, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "B4"
TITLE = "B4 — start from nothing to 4 workers ready, and shutdown"
SUBJECTS = {
    "skyward": "skyward Compute(nodes=4)",
    "ray": "ray.init + 4 actors",
    "dask": "Dask LocalCluster(4)",
    "process_pool": "ProcessPoolExecutor(4)",
}


def run(quick: bool = False) -> list[Row]:
    """A start row and a shutdown row per engine, over fresh interpreters."""
    runs = 1 if quick else 5
    outcomes = interleaved(start_and_stop, runs)
    rows: list[Row] = []
    for engine, subject in SUBJECTS.items():
        results = outcomes[engine]
        if isinstance(results, SubjectFailed):
            rows += [failed_row(GROUP, f"{subject} {m}", results, metric=m) for m in ("start", "shutdown")]
            continue
        imports = statistics.median(r["import"] for r in results)
        left = max(r["left"] for r in results)
        rows.append(row(GROUP, f"{subject} start", [r["start"] for r in results],
                        f"import {imports:.2f} s not counted", metric="start"))
        rows.append(row(GROUP, f"{subject} import", [r["import"] for r in results], metric="import"))
        rows.append(row(GROUP, f"{subject} shutdown", [r["shutdown"] for r in results],
                        f"{left} processes still alive after it returned" if left else "",
                        metric="shutdown", facts={"left": left}))
    return rows


def interleaved(fn: Callable[[str], Any], runs: int) -> dict[str, list[Any] | SubjectFailed]:
    """``fn(engine)`` ``runs`` times per engine, each in a fresh interpreter, the engines
    taking turns (skyward, Ray, Dask, ProcessPool, skyward, ...) so that a burst of other
    load on the machine does not fall on one engine's runs only. An engine that fails once
    is not run again; its entry is the failure."""
    outcomes: dict[str, list[Any] | SubjectFailed] = {engine: [] for engine in SUBJECTS}
    for _ in range(runs):
        for engine in SUBJECTS:
            results = outcomes[engine]
            if isinstance(results, SubjectFailed):
                continue
            try:
                results.append(isolated(fn, engine))
            except SubjectFailed as exc:
                outcomes[engine] = exc
    return outcomes


def start_and_stop(engine: str) -> dict:
    """One run: import (the engine's own module timed alone, then what its start
    needs), start (timed), stop (timed), count processes left."""
    began = time.perf_counter()
    importlib.import_module(engines.IMPORTS[engine][0])
    own = time.perf_counter()
    engines.import_engine(engine)
    imported = time.perf_counter()
    handle = engines.start(engine)
    started = time.perf_counter()
    engines.stop(engine, handle)
    stopped = time.perf_counter()
    left = [p for p in process_tree()[1:] if p.is_running() and p.status() != "zombie"]
    return {
        "import": own - began,
        "start": started - imported,
        "shutdown": stopped - started,
        "left": len(left),
    }
