"""B4 — start from nothing to 4 workers ready, and shut down.

Each run is a fresh interpreter, the engines taking turns run by run. The engine's
modules are imported first, with everything its start imports (skyward's first open
imports Ray): reported as the import row, not counted in the start;
then the clock runs until each of the 4 workers has answered one call: skyward
`Compute(nodes=4)` opened plus one broadcast, `ray.init` plus 4 actors each answering, a
Dask LocalCluster of 4 worker processes plus `client.run`, and a ProcessPoolExecutor
whose 4 workers each ran a submit. Shutdown is timed from the call that stops the
engine until it returns; the note says whether any process the engine started was still
alive then. The kept and warm rows (a script run again, calling a function it defines)
are given twice: from `sky.Compute(...)` to every node's first answer, and with the
script's `import skyward` before it, which the user waits for as well.
"""

from __future__ import annotations

import importlib
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads
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
        own = statistics.median(r["own_import"] for r in results)
        left = max(r["left"] for r in results)
        rows.append(row(GROUP, f"{subject} start", [r["start"] for r in results],
                        f"import {imports:.2f} s not counted", metric="start"))
        rows.append(row(GROUP, f"{subject} import", [r["import"] for r in results],
                        f"with what its start imports; `import {engines.IMPORTS[engine][0]}` alone {own * 1e3:.0f} ms",
                        metric="import", facts={"own_import_s": own}))
        rows.append(row(GROUP, f"{subject} shutdown", [r["shutdown"] for r in results],
                        f"{left} processes still alive after it returned" if left else "",
                        metric="shutdown", facts={"left": left}))
    try:
        warm = again(warm_open, runs)
        rows.append(row(GROUP, WARM, [r["open"] for r in warm], f"keep_warm={KEEP_WARM:g}; `import skyward` not counted",
                        metric="warm"))
        rows.append(row(GROUP, f"{WARM}, with `import skyward`", [r["import"] + r["open"] for r in warm],
                        f"keep_warm={KEEP_WARM:g}", metric="warm+import"))
    except SubjectFailed as exc:
        rows.append(failed_row(GROUP, WARM, exc, metric="warm"))
    try:
        kept = again(kept_run, runs)
        without_ray = all(not r["ray"] for r in kept)
        client = "no Ray in the client" if without_ray else "the client imported Ray"
        rows.append(row(GROUP, KEPT, [r["open"] for r in kept],
                        f"keep_alive={KEEP_ALIVE:g}; `import skyward` not counted; {client}",
                        metric="kept", facts={"without_ray": without_ray}))
        rows.append(row(GROUP, f"{KEPT}, with `import skyward`", [r["import"] + r["open"] for r in kept],
                        f"keep_alive={KEEP_ALIVE:g}; {client}", metric="kept+import"))
    except SubjectFailed as exc:
        rows.append(failed_row(GROUP, KEPT, exc, metric="kept"))
    return rows


KEPT = "skyward kept pool, the script run again (keep_alive)"
KEEP_ALIVE = 120.0
WARM = "skyward warm open, Local(keep_warm)"
KEEP_WARM = 60.0


def again(script: Callable[[], dict], runs: int) -> list[dict]:
    """``script`` as a script run again and again: each run in a fresh interpreter with
    a private $SKYWARD_HOME; the first run opens the pool, which is kept (not counted),
    each later one adopts it. The kept pool and its daemon are ended at the end."""
    import tempfile

    saved = os.environ.get("SKYWARD_HOME")
    with tempfile.TemporaryDirectory(prefix="skybench-home-") as home:
        os.environ["SKYWARD_HOME"] = home
        try:
            isolated(script)
            return [isolated(script) for _ in range(runs)]
        finally:
            from skyward.providers.daemon_client import end_pools, stop_all

            end_pools("")
            stop_all()
            if saved is None:
                os.environ.pop("SKYWARD_HOME", None)
            else:
                os.environ["SKYWARD_HOME"] = saved


def kept_run() -> dict:
    """One run: ``import skyward`` (timed apart), adopt (or open) the kept 4-node pool
    and have every node answer a function of the script (timed); whether Ray was
    imported."""
    import sys

    began = time.perf_counter()
    import skyward as sky

    imported = time.perf_counter()
    pid = sky.function(payloads.in_script("pid"))
    started = time.perf_counter()
    with sky.Compute(nodes=engines.WORKERS, keep_alive=KEEP_ALIVE, console=False, logging=False) as pool:
        assert len(pid() @ pool) == engines.WORKERS
        first = time.perf_counter() - started
    return {"import": imported - began, "open": first, "ray": "ray" in sys.modules}


def warm_open() -> dict:
    """One run: ``import skyward`` (timed apart), open (or adopt) the 4-node keep_warm
    pool and have every node answer a function of the script (timed), leave it."""
    began = time.perf_counter()
    import skyward as sky

    imported = time.perf_counter()
    pid = sky.function(payloads.in_script("pid"))
    started = time.perf_counter()
    with sky.Compute(provider=sky.Local(keep_warm=KEEP_WARM), nodes=engines.WORKERS,
                     options=sky.Options(console=False, logging=False)) as pool:
        assert len(pid() @ pool) == engines.WORKERS
        opened = time.perf_counter() - started
    return {"import": imported - began, "open": opened}


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
        "own_import": own - began,
        "import": imported - began,
        "start": started - imported,
        "shutdown": stopped - started,
        "left": len(left),
    }
