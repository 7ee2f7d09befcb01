"""Shared pieces of the benchmark suite: result rows, timing, memory (PSS), the machine
description and the markdown report."""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from typing import Any, NotRequired, TypedDict

import psutil

PACKAGES = ("ray", "dask", "distributed", "joblib", "numpy", "psutil", "skyward")


class Row(TypedDict):
    """One measured subject. Values are seconds unless ``unit`` says otherwise."""

    group: str
    subject: str
    median_s: float
    min_s: float
    max_s: float
    runs: int
    note: str
    unit: NotRequired[str]
    metric: NotRequired[str]
    facts: NotRequired[dict[str, Any]]
    ratio: NotRequired[float | None]


class Check(TypedDict):
    """One target of the issue and whether this run meets it."""

    id: str
    target: str
    measured: str
    passed: bool | None


def row(
    group: str,
    subject: str,
    samples: Sequence[float],
    note: str = "",
    *,
    unit: str = "s",
    metric: str = "",
    facts: dict[str, Any] | None = None,
) -> Row:
    """A row from raw samples (median, min, max over them). Rows of one group compare
    with the skyward row of the same ``metric``."""
    if not samples:
        raise ValueError(f"{group}/{subject}: no samples")
    result: Row = {
        "group": group,
        "subject": subject,
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "runs": len(samples),
        "note": note,
    }
    if unit != "s":
        result["unit"] = unit
    if metric:
        result["metric"] = metric
    if facts:
        result["facts"] = facts
    return result


def failed_row(group: str, subject: str, error: BaseException | str, *, metric: str = "") -> Row:
    """A row for a subject that could not be measured; its numbers are NaN."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    result: Row = {
        "group": group,
        "subject": subject,
        "median_s": math.nan,
        "min_s": math.nan,
        "max_s": math.nan,
        "runs": 0,
        "note": f"failed: {text.strip().splitlines()[-1] if text.strip() else text}",
    }
    if metric:
        result["metric"] = metric
    return result


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took, and what it returned."""
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def repeat(fn: Callable[[], Any], runs: int, warmup: int = 0) -> list[float]:
    """Seconds of each of ``runs`` calls of ``fn``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    return [timed(fn)[0] for _ in range(runs)]


def process_tree(pid: int | None = None) -> list[psutil.Process]:
    """The process ``pid`` (default: this one) and all its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def pss_by_process(pid: int | None = None) -> dict[str, int]:
    """Proportional set size in bytes per process name over the tree of ``pid``; the
    root process is named "driver"."""
    totals: dict[str, int] = {}
    for index, process in enumerate(process_tree(pid)):
        try:
            name = process.name() if index else "driver"
            pss = process.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        totals[name] = totals.get(name, 0) + pss
    return totals


def tree_pss(pid: int | None = None) -> int:
    """Proportional set size in bytes of ``pid`` (default: this process) and its descendants."""
    return sum(pss_by_process(pid).values())


def machine() -> dict[str, str]:
    """What this run ran on: CPU, cores, memory, OS, Python and package versions."""
    memory = psutil.virtual_memory().total / 1024**3
    logical = os.cpu_count() or 1
    usable = usable_cores()
    physical = psutil.cpu_count(logical=False) or logical
    info = {
        "CPU": _cpu_model(),
        "cores": f"{usable} usable ({logical} logical, {physical} physical)",
        "RAM": f"{memory:.1f} GB",
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {sys.version.split()[0]}",
    }
    for package in PACKAGES:
        info[package] = _version(package)
    return info


def usable_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def format_value(value: float, unit: str = "s") -> str:
    """A value for a table: seconds as ms or s, anything else with its unit."""
    if math.isnan(value):
        return "—"
    if unit == "%":
        return f"{value:.1f} %"
    if unit != "s":
        return f"{value:,.0f} {unit}"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms" if value < 0.1 else f"{value * 1e3:.0f} ms"
    return f"{value:.2f} s"


def format_ratio(ratio: float | None) -> str:
    """A ratio for a table, blank when there is none."""
    return "" if ratio is None or math.isnan(ratio) else f"{ratio:.2f}x"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub markdown table; ``|`` inside cells is escaped."""
    def cells(values: Sequence[Any]) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in values) + " |"

    lines = [cells(headers), "|" + "|".join("---" for _ in headers) + "|"]
    lines += [cells(values) for values in rows]
    return "\n".join(lines)


def results_table(rows: Sequence[Row]) -> str:
    """The results of one group: median, min, max, runs, ratio to skyward and a note."""
    headers = ("subject", "median", "min", "max", "runs", "skyward ÷ peer", "note")
    return markdown_table(
        headers,
        (
            (
                r["subject"],
                format_value(r["median_s"], r.get("unit", "s")),
                format_value(r["min_s"], r.get("unit", "s")),
                format_value(r["max_s"], r.get("unit", "s")),
                r["runs"],
                format_ratio(r.get("ratio")),
                r["note"],
            )
            for r in rows
        ),
    )


def render_report(
    rows: Sequence[Row],
    checks: Sequence[Check],
    machine_info: dict[str, str],
    *,
    when: str,
    header: str,
    sections: dict[str, str],
    methods: dict[str, str],
    explanations: Sequence[tuple[str, str]],
) -> str:
    """The whole of docs/benchmarks.md: how to run, the machine, results per group,
    targets, why missed targets are missed, and how each group measures."""
    parts = [header.rstrip(), "", f"Measured {when}.", "", "## Machine", ""]
    parts.append(markdown_table(("", ""), machine_info.items()))
    parts += ["", "## Results", "", _RATIO_HELP, ""]
    for group in dict.fromkeys(r["group"] for r in rows):
        parts += [f"### {sections.get(group, group)}", ""]
        parts += [results_table([r for r in rows if r["group"] == group]), ""]
    parts += ["## Targets", ""]
    parts.append(
        markdown_table(
            ("id", "target", "measured", "result"),
            ((c["id"], c["target"], c["measured"], _verdict(c["passed"])) for c in checks),
        )
    )
    parts += ["", "## Why a target is missed and what would close it", ""]
    if not explanations:
        parts += ["Every target measured in this run is met.", ""]
    for title, text in explanations:
        parts += [f"### {title}", "", text.strip(), ""]
    if methods:
        parts += ["## How each group measures", ""]
        for group, text in methods.items():
            parts += [f"**{sections.get(group, group)}.** {text.strip()}", ""]
    return "\n".join(parts).rstrip() + "\n"


_RATIO_HELP = (
    "Median, min and max are over the runs (for B1, over single calls). "
    "\"skyward ÷ peer\" divides skyward's median by that peer's (for a rate in ops/s, the peer's by "
    "skyward's): below 1.00x skyward is faster (or smaller), above it slower. Every peer ran in the same run on the same machine, "
    "each in a fresh interpreter."
)


def _verdict(passed: bool | None) -> str:
    return "n/a" if passed is None else ("**pass**" if passed else "**MISS**")
