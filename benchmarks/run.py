"""Run the benchmark suite and write docs/benchmarks.md.

    .venv/bin/pip install -e '.[bench]'                # once: the peers (dask, joblib, numpy)
    .venv/bin/python -m benchmarks.run                 # everything (~10 min), writes docs/benchmarks.md
    .venv/bin/python -m benchmarks.run --quick         # smoke run, fewer runs (~4 min)
    .venv/bin/python -m benchmarks.run --only B1,B3    # some groups

Run it on a quiet machine: every number is wall-clock time on shared cores.

Every ``benchmarks/bench_*.py`` module is a group: it exposes ``run(quick) -> list[Row]``
and optionally ``GROUP`` (its id), ``TITLE`` and a docstring describing the method. The
report is written only by a full run of every group, unless ``--output`` names a file.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    Row,
    failed_row,
    format_ratio,
    format_value,
    machine,
    markdown_table,
    render_report,  # noqa: E402
)
from benchmarks.targets import check_all, explain  # noqa: E402

REPORT = ROOT / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

```bash
.venv/bin/pip install -e '.[bench]'          # the peers: dask[distributed], joblib, numpy
.venv/bin/python -m benchmarks.run           # full run (~{minutes} min here), rewrites this file
.venv/bin/python -m benchmarks.run --quick   # smoke run; --only B1,B3 runs some groups
```

Run it on a quiet machine: the numbers are wall-clock times on shared cores, and anything
else running skews them (the load average at the start is in the machine table).

Skyward against its peers on the same machine in the same run: a raw Ray actor call, Ray
tasks and the object store, Dask (`distributed.LocalCluster`), `ProcessPoolExecutor` and
joblib. Skyward pools are `sky.Compute(nodes=4, options=sky.Options(console=False,
logging=False))`; every peer has 4 workers too, listens on 127.0.0.1 only and runs with no
dashboard; each Ray peer gets its own temp dir.
"""


def discover() -> list[ModuleType]:
    """Every ``benchmarks/bench_*.py`` module, in file-name order."""
    names = sorted(path.stem for path in (ROOT / "benchmarks").glob("bench_*.py"))
    return [importlib.import_module(f"benchmarks.{name}") for name in names]


def group_of(module: ModuleType) -> str:
    return getattr(module, "GROUP", module.__name__.rsplit(".", 1)[-1].removeprefix("bench_"))


def selected(modules: Sequence[ModuleType], only: str | None) -> list[ModuleType]:
    """The modules whose group id or file name (without ``bench_``) is in ``only``."""
    if not only:
        return list(modules)
    wanted = {name.strip().lower() for name in only.split(",") if name.strip()}
    chosen = [
        m for m in modules
        if group_of(m).lower() in wanted or m.__name__.rsplit(".", 1)[-1].removeprefix("bench_").lower() in wanted
    ]
    if not chosen:
        known = ", ".join(group_of(m) for m in modules)
        raise SystemExit(f"--only {only}: no such group (known: {known})")
    return chosen


def run_module(module: ModuleType, quick: bool) -> list[Row]:
    """The module's rows; a module that raises yields one failed row."""
    started = time.monotonic()
    print(f"[{group_of(module)}] running ...", file=sys.stderr, flush=True)
    try:
        rows = list(module.run(quick=quick))
    except Exception as exc:  # one broken group must not lose the others' results
        rows = [failed_row(group_of(module), "(whole group)", exc)]
    print(f"[{group_of(module)}] done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return rows


def with_ratios(rows: list[Row]) -> list[Row]:
    """Set each peer row's ``ratio``: the median of the first skyward row of the same
    group and metric, divided by the peer's median; for a rate (ops/s) the peer's divided
    by skyward's, so that below 1.00x skyward is faster in every row."""
    for current in rows:
        if current["subject"].startswith("skyward"):
            current["ratio"] = None
            continue
        ours = next(
            (
                r for r in rows
                if r["group"] == current["group"] and r.get("metric", "") == current.get("metric", "")
                and r["subject"].startswith("skyward") and r["runs"]
            ),
            None,
        )
        valid = ours is not None and current["runs"] and current["median_s"] > 0 and ours["median_s"] > 0
        if not valid or ours is None:
            current["ratio"] = None
        elif current.get("unit") == "ops/s":
            current["ratio"] = current["median_s"] / ours["median_s"]
        else:
            current["ratio"] = ours["median_s"] / current["median_s"]
    return rows


def console_table(rows: Sequence[Row]) -> str:
    return markdown_table(
        ("group", "subject", "median", "min", "max", "runs", "skyward ÷ peer", "note"),
        (
            (r["group"], r["subject"], format_value(r["median_s"], r.get("unit", "s")),
             format_value(r["min_s"], r.get("unit", "s")), format_value(r["max_s"], r.get("unit", "s")),
             r["runs"], format_ratio(r.get("ratio")), r["note"])
            for r in rows
        ),
    )


def machine_info() -> dict[str, str]:
    """The machine, plus how busy it was when the run started and whether skyward's
    bytecode was there."""
    info = machine()
    one, five, _ = os.getloadavg()
    info["load average at start"] = f"{one:.2f} (1 min), {five:.2f} (5 min)"
    info["skyward's bytecode"] = compile_skyward()
    return info


def compile_skyward() -> str:
    """Write skyward's bytecode, as installing its wheel does (pip compiles what it
    installs; the peers were installed that way). An editable checkout has none, and
    with ``PYTHONDONTWRITEBYTECODE`` set Python never writes it: every fresh interpreter
    of the run would compile the package from source (0.2-0.3 s here), a cost no user
    pays. Says what was done, for the machine table."""
    import compileall

    import skyward

    package = Path(skyward.__file__).parent
    if not compileall.compile_dir(str(package), quiet=1):
        raise SystemExit(f"could not compile {package}")
    return f"compiled before the run, as a wheel install does ({package})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Skyward benchmarks against Ray, Dask, ProcessPoolExecutor, joblib.")
    parser.add_argument("--quick", action="store_true", help="fewer runs: a smoke test of the suite")
    parser.add_argument("--only", help="comma-separated groups to run, e.g. B1,B3")
    parser.add_argument("--output", type=Path, help=f"write the report here (a full run writes {REPORT})")
    parser.add_argument("--rows", type=Path, help="also save the measured rows here (JSON)")
    parser.add_argument("--from-rows", type=Path,
                        help="measure nothing: render the report again from rows saved with --rows")
    args = parser.parse_args(argv)

    modules = discover()
    chosen = selected(modules, args.only)
    if args.from_rows is not None:
        saved = json.loads(args.from_rows.read_text(encoding="utf-8"))
        info, elapsed, finished = saved["machine"], saved["elapsed_s"], saved["finished"]
        rows = with_ratios(saved["rows"])  # as the ratios are read now
    else:
        info = machine_info()
        started = time.monotonic()
        rows = with_ratios([r for module in chosen for r in run_module(module, args.quick)])
        elapsed = time.monotonic() - started
        finished = f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
    if args.rows is not None:
        saved = {"machine": info, "rows": rows, "elapsed_s": elapsed, "finished": finished}
        args.rows.write_text(json.dumps(saved), encoding="utf-8")
    checks = check_all(rows)

    print(console_table(rows))
    print()
    print(markdown_table(("id", "target", "measured", "result"),
                         ((c["id"], c["target"], c["measured"], _verdict(c["passed"])) for c in checks)))

    full = not args.quick and len(chosen) == len(modules)
    output = args.output or (REPORT if full else None)
    if output is not None:
        kind = "quick run" if args.quick else ("full run" if full else f"run of {args.only}")
        when = f"{finished} ({kind}, {elapsed / 60:.1f} min)"
        report = render_report(
            rows, checks, info,
            when=when,
            header=HEADER.format(minutes=max(1, math.ceil(elapsed / 60)) if full else "10-15"),
            sections={group_of(m): getattr(m, "TITLE", group_of(m)) for m in chosen},
            methods={group_of(m): _method(m) for m in chosen if m.__doc__},
            explanations=explain(checks),
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report, encoding="utf-8")
        print(f"\nwrote {output}", file=sys.stderr)
    return 0


def _method(module: ModuleType) -> str:
    """A module docstring without its title line and its indented usage lines."""
    lines = (module.__doc__ or "").strip().splitlines()
    prose = [line.strip() for line in lines[1:] if line.strip() and not line.startswith("    ")]
    return " ".join(prose) or (lines[0] if lines else "")


def _verdict(passed: bool | None) -> str:
    return "n/a" if passed is None else ("pass" if passed else "MISS")


if __name__ == "__main__":
    sys.exit(main())
