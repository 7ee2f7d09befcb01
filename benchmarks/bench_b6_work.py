"""B6 — real work: 200 tasks of about 20 ms of CPU-bound numpy each.

The number of `payloads.burn` passes is calibrated once (in a fresh interpreter) to take
about 20 ms on one core; that interpreter also times one task serially (fastest of 25).
The ideal is 200 tasks × that time ÷ the usable cores (4 workers cannot beat the cores
they share).
Efficiency = ideal ÷ measured. Subjects: skyward with 200 separate calls
(`sky.gather(...) >> pool`) and with `pool.map`, Ray tasks, Dask `client.map`, and
`ProcessPoolExecutor.map` (chunksize 1). Skyward and ProcessPoolExecutor run the same
work as a function defined in the script (`__main__`), as users write it. The subjects
take turns round by round, each round in fresh interpreters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row, failed_row, repeat, timed, usable_cores
from benchmarks.isolate import Subject, SubjectFailed, alternated, isolated

GROUP = "B6"
TITLE = "B6 — 200 tasks of 20 ms CPU-bound numpy"
TASKS = 200
TASK_SECONDS = 0.02


def run(quick: bool = False) -> list[Row]:
    """Every subject, the subjects taking turns round by round, with the efficiency in
    its note."""
    rounds, runs = (1, 2) if quick else (3, 1)
    try:
        reps, task_seconds = isolated(calibrate)
    except SubjectFailed as exc:
        return [failed_row(GROUP, "calibration", exc)]
    ideal = TASKS * task_seconds / min(usable_cores(), engines.WORKERS)
    rows = alternated([
        Subject(GROUP, "skyward 200 calls (gather >> pool)", skyward_calls, (runs, reps)),
        Subject(GROUP, "skyward pool.map", skyward_map, (runs, reps)),
        Subject(GROUP, "Ray tasks", ray_tasks, (runs, reps)),
        Subject(GROUP, "Dask client.map", dask_map, (runs, reps)),
        Subject(GROUP, "ProcessPoolExecutor.map chunksize=1", process_pool_map, (runs, reps)),
    ], rounds)
    for result in rows:
        if result["runs"]:
            efficiency = ideal / result["median_s"]
            result["facts"] = {"ideal_s": ideal, "task_s": task_seconds, "efficiency": efficiency}
            result["note"] = "; ".join(filter(None, (f"{efficiency:.0%} of ideal {ideal:.2f} s", result["note"])))
    return rows


def calibrate() -> tuple[int, float]:
    """Passes of ``burn`` that take about ``TASK_SECONDS``, and the serial time of one such
    task (the fastest of 25: the least disturbed by anything else on the machine)."""
    payloads.burn(50)
    per_pass = min(timed(lambda: payloads.burn(500))[0] for _ in range(5)) / 500
    reps = max(1, round(TASK_SECONDS / per_pass))
    return reps, min(repeat(lambda: payloads.burn(reps), 25, warmup=3))


def _timed_work(work: Callable[[], list[Any]], runs: int) -> dict:
    """Time ``work`` ``runs`` times after a warm-up, checking it ran every task."""
    work()
    counts: list[int] = []
    samples = repeat(lambda: counts.append(len(work())), runs)
    complete = all(count == TASKS for count in counts)
    return {"samples": samples, "note": "" if complete else "tasks missing"}


def skyward_calls(runs: int, reps: int) -> dict:
    import skyward as sky

    burn = sky.function(payloads.in_script("burn"))
    with engines.skyward_pool() as pool:
        return _timed_work(lambda: list(sky.gather(*(burn(reps) for _ in range(TASKS))) >> pool), runs)


def skyward_map(runs: int, reps: int) -> dict:
    burn = payloads.in_script("burn")
    with engines.skyward_pool() as pool:
        return _timed_work(lambda: pool.map(burn, [reps] * TASKS), runs)


def ray_tasks(runs: int, reps: int) -> dict:
    import ray

    with engines.ray_instance():
        burn = ray.remote(payloads.burn)
        return _timed_work(lambda: ray.get([burn.remote(reps) for _ in range(TASKS)]), runs)


def dask_map(runs: int, reps: int) -> dict:
    with engines.dask_client() as client:
        return _timed_work(lambda: client.gather(client.map(payloads.burn, [reps] * TASKS, pure=False)), runs)


def process_pool_map(runs: int, reps: int) -> dict:
    burn = payloads.in_script("burn")
    with engines.process_pool() as executor:
        return _timed_work(lambda: list(executor.map(burn, [reps] * TASKS)), runs)
