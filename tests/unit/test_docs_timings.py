"""The timings the docs promise are the benchmark run's: every figure cited with a
target's name, as ``0.27 s (B4-kept)``, must be the figure docs/benchmarks.md measured
for it, so a rerun that moves a row fails here until the prose follows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
CITING = (ROOT / "README.md", *sorted(path for path in (ROOT / "docs").glob("*.md") if path != BENCHMARKS))

CITATION = re.compile(r"(\d+(?:\.\d+)?)\s+(ms|s)\s+\(([A-Z]\d*(?:-[a-z]+)+)\b")
"""A figure and the target it comes from: ``0.27 s (B4-kept`` in ``0.27 s (B4-kept; ...)``."""
TARGET_ROW = re.compile(r"^\| ([A-Z]\d*(?:-[a-z]+)*) \| .+? \| (.+?) \| \*\*(?:pass|MISS)\*\* \|$", re.MULTILINE)
SECONDS = re.compile(r"^(\d+(?:\.\d+)?) (ms|µs|s)\b")
RATIO_TARGETS = {
    "B4-start": "skyward Compute(nodes=4) start",
    "B4-import": "skyward Compute(nodes=4) import",
}
"""Targets measured as a ratio to a peer: the figure a doc cites for them is the
median of this row of their group's table."""


def _seconds(value: str, unit: str) -> float:
    return float(value) * {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[unit]


def measured() -> dict[str, float]:
    """Each target's measured seconds in docs/benchmarks.md (a ratio target's: its row's
    median)."""
    text = BENCHMARKS.read_text()
    figures: dict[str, float] = {}
    for name, cell in TARGET_ROW.findall(text):
        found = SECONDS.match(cell)
        if found:
            figures[name] = _seconds(*found.groups())
    for name, subject in RATIO_TARGETS.items():
        row = re.search(rf"^\| {re.escape(subject)} \| (\d+(?:\.\d+)?) (ms|µs|s) \|", text, re.MULTILINE)
        assert row, f"docs/benchmarks.md has no row {subject!r} for {name}"
        figures[name] = _seconds(*row.groups())
    return figures


def citations() -> list[tuple[str, int, str, str, str]]:
    """(file, line, value, unit, target) of every cited figure, one that a line break
    splits too."""
    found = []
    for path in CITING:
        text = path.read_text()
        for match in CITATION.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            found.append((path.relative_to(ROOT).as_posix(), number, *match.groups()))
    return found


def _agrees(cited: str, unit: str, actual: float) -> bool:
    """The cited figure is the measured one at the precision it is written with."""
    decimals = len(cited.partition(".")[2])
    scale = 1e-3 if unit == "ms" else 1.0
    return abs(float(cited) - actual / scale) <= 0.5 * 10 ** -decimals + 1e-9


def test_the_docs_cite_timings_as_the_benchmark_run_measured_them() -> None:
    figures = measured()
    cited = citations()
    assert len(cited) >= 8, f"the docs cite {len(cited)} benchmark figures; the guide and kept-pools.md cite more"
    wrong = [
        f"{path}:{line}: {value} {unit} ({target}) but docs/benchmarks.md measured "
        + (f"{figures[target]:.3g} s" if target in figures else "no such target")
        for path, line, value, unit, target in cited
        if target not in figures or not _agrees(value, unit, figures[target])
    ]
    assert not wrong, "\n".join(wrong)


def test_a_figure_that_moved_is_caught() -> None:
    figures = measured()
    kept = figures["B4-kept"]
    assert _agrees(f"{kept:.3f}", "s", kept)
    assert not _agrees(f"{kept + 0.05:.2f}", "s", kept)
    assert not _agrees(f"{kept * 1000 / 4:.0f}", "ms", kept)
