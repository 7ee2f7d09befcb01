"""The benchmark suite runs end to end (one group, quick) and writes its report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_b1_run_writes_a_report(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="the peers are in the `bench` extra")
    report = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "B1", "--output", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=480,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = report.read_text(encoding="utf-8")
    assert "## Machine" in text and "### B1" in text
    assert "| skyward f() >> pool, f in the script |" in text and "| skyward f() >> pool, f imported |" in text
    assert "| Ray actor call |" in text
    assert "failed:" not in text
