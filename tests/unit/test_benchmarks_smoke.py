"""The benchmark suite's report writer, on made-up rows (no benchmark runs here)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

COMMON = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"


def load_common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_common_under_test", COMMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_row_summarizes_samples() -> None:
    common = load_common()
    row = common.row("B1", "skyward f() >> pool", [0.003, 0.001, 0.002], "warm")
    assert (row["median_s"], row["min_s"], row["max_s"], row["runs"]) == (0.002, 0.001, 0.003, 3)
    failed = common.failed_row("B1", "Ray task", RuntimeError("boom"))
    assert failed["runs"] == 0 and math.isnan(failed["median_s"]) and "boom" in failed["note"]


def test_report_has_results_table_targets_and_machine_section() -> None:
    common = load_common()
    rows = [
        common.row("B1", "skyward f() >> pool", [0.002, 0.0021]),
        {**common.row("B1", "Ray actor call", [0.001]), "ratio": 2.0},
        common.row("B5", "skyward Compute(nodes=4)", [600.0], unit="MiB"),
    ]
    checks = [{"id": "B1-actor", "target": "≤ 1.3x a Ray actor call", "measured": "2.00x", "passed": False}]
    report = common.render_report(
        rows, checks, {"CPU": "Test CPU", "cores": "2"},
        when="today", header="# Benchmarks\n\n`.venv/bin/python benchmarks/run.py`",
        sections={"B1": "B1 — round trip"}, methods={"B1": "one call at a time"},
        explanations=[("B1-actor", "the agent is a threaded actor")],
    )
    assert "## Machine" in report and "| CPU | Test CPU |" in report
    assert "### B1 — round trip" in report
    assert "| subject | median | min | max | runs | skyward ÷ peer | note |" in report
    assert "| Ray actor call | 1.00 ms | 1.00 ms | 1.00 ms | 1 | 2.00x |  |" in report
    assert "600 MiB" in report
    assert "**MISS**" in report and "the agent is a threaded actor" in report
    assert report.index("## Machine") < report.index("## Results") < report.index("## Targets")


def test_machine_describes_cores_and_versions() -> None:
    info = load_common().machine()
    for key in ("CPU", "cores", "RAM", "OS", "Python", "ray"):
        assert info[key]
