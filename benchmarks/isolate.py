"""Run one benchmark subject in a fresh interpreter: every engine starts from nothing,
nothing one engine leaves behind (threads, processes, Ray state) touches the next, and
every process the subject started is gone when it returns.

``isolated(fn, *args)`` runs ``fn(*args)`` as ``python -m benchmarks.isolate`` and
returns what ``fn`` returned (JSON-serializable).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from benchmarks.common import Row, failed_row, row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {"RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
TIMEOUT = 600.0


class SubjectFailed(RuntimeError):
    """The subject's interpreter failed; the message holds the end of its stderr."""


def isolated(fn: Callable[..., Any], *args: Any, timeout: float = TIMEOUT) -> Any:
    """``fn(*args)`` in a fresh ``python`` whose process group is killed afterwards."""
    target = f"{fn.__module__}:{fn.__qualname__}"
    env = {**os.environ, **ENV, "PYTHONPATH": os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))}
    with tempfile.TemporaryDirectory(prefix="skybench-") as scratch:
        result_path = os.path.join(scratch, "result.json")
        log_path = os.path.join(scratch, "stderr.log")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.isolate", target, json.dumps(args), result_path],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            )
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process.pid)
                process.wait()
                raise SubjectFailed(f"{target} took longer than {timeout:g}s") from None
            finally:
                _kill_group(process.pid)
        if process.returncode != 0 or not os.path.exists(result_path):
            with open(log_path, encoding="utf-8", errors="replace") as log:
                tail = log.read()[-2000:]
            raise SubjectFailed(f"{target} exited with {process.returncode}: {tail}")
        with open(result_path, encoding="utf-8") as result:
            return json.load(result)


def measured(group: str, subject: str, fn: Callable[..., Any], *args: Any, metric: str = "", unit: str = "s") -> Row:
    """A row from ``fn(*args)`` run isolated; ``fn`` returns ``{"samples": [...]}`` and
    optionally ``"note"`` and ``"facts"``. A failure becomes a row that says why."""
    try:
        result = isolated(fn, *args)
    except SubjectFailed as exc:
        return failed_row(group, subject, exc, metric=metric)
    return row(
        group, subject, result["samples"], result.get("note", ""),
        unit=unit, metric=metric, facts=result.get("facts"),
    )


@dataclass(frozen=True)
class Subject:
    """One subject of a group: ``fn(*args)`` run isolated returns ``{"samples": [...]}``
    and optionally ``"note"`` and ``"facts"`` (as for ``measured``)."""

    group: str
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    metric: str = ""
    unit: str = "s"


def alternated(subjects: Sequence[Subject], rounds: int) -> list[Row]:
    """A row per subject from ``rounds`` runs of each, every run in a fresh interpreter,
    the subjects taking turns (A, B, C, A, B, C, ...) so that a burst of other load on
    the machine, or its drift over the group, does not fall on one subject's runs only.
    A row's samples are those of all its rounds; its facts are merged (``merged_facts``).
    A subject that fails once is not run again: its row says why."""
    outcomes: list[list[dict[str, Any]] | SubjectFailed] = [[] for _ in subjects]
    for _ in range(rounds):
        for index, subject in enumerate(subjects):
            results = outcomes[index]
            if isinstance(results, SubjectFailed):
                continue
            try:
                results.append(isolated(subject.fn, *subject.args))
            except SubjectFailed as exc:
                outcomes[index] = exc
    rows: list[Row] = []
    for subject, results in zip(subjects, outcomes, strict=True):
        if isinstance(results, SubjectFailed):
            rows.append(failed_row(subject.group, subject.name, results, metric=subject.metric))
            continue
        notes = dict.fromkeys(r["note"] for r in results if r.get("note"))
        rows.append(row(
            subject.group, subject.name, [s for r in results for s in r["samples"]], "; ".join(notes),
            unit=subject.unit, metric=subject.metric,
            facts=merged_facts([r.get("facts") or {} for r in results]),
        ))
    return rows


def merged_facts(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The facts of several rounds as one: a value every round agrees on stays, a flag
    holds only if it held in every round, a number is the median over the rounds,
    anything else is the last round's."""
    merged: dict[str, Any] = {}
    for name in dict.fromkeys(name for facts in rounds for name in facts):
        values = [facts[name] for facts in rounds if name in facts]
        if all(v == values[0] for v in values):
            merged[name] = values[0]
        elif all(isinstance(v, bool) for v in values):
            merged[name] = all(values)
        elif all(isinstance(v, int | float) for v in values):
            merged[name] = statistics.median(values)
        else:
            merged[name] = values[-1]
    return merged


def reap_children(grace: float = 5.0) -> list[str]:
    """Terminate (then kill) every descendant of this process; names of those found."""
    children = psutil.Process().children(recursive=True)
    names = []
    for child in children:
        try:
            names.append(child.name())
            child.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    return names


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> None:
    """Entry point of the fresh interpreter: ``TARGET ARGS_JSON RESULT_PATH``."""
    module_name, name = argv[1].split(":")
    fn = getattr(importlib.import_module(module_name), name)
    result = fn(*json.loads(argv[2]))
    leftovers = reap_children()
    if leftovers:
        print(f"benchmark subject left processes behind: {leftovers}", file=sys.stderr)
    with open(argv[3], "w", encoding="utf-8") as out:
        json.dump(result, out)
    sys.stderr.flush()
    os._exit(0)  # engines' leftover threads must not hold the interpreter open


if __name__ == "__main__":
    main(sys.argv)
