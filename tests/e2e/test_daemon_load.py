"""The pool daemon under load and a SIGKILL loses nothing (benchmarks/bench_daemon_load.py
at its quick size: 2 kept pools, 6 scripts, 20 HTTP clients of which 2 follow runs, 100
half-open connections, the daemon killed half way): every script gets its pool, every
run its exit, every pool is listed and adopted after the kill, and `sky down --all`
leaves no process and no socket. The full size runs in the benchmark suite."""

from __future__ import annotations

import pytest

from benchmarks.bench_daemon_load import QUICK, measure
from benchmarks.isolate import isolated

pytestmark = pytest.mark.slow


def test_the_daemon_under_load_and_killed_in_the_middle_loses_nothing() -> None:
    found = isolated(measure, QUICK, timeout=900)
    assert found["lost"] == {key: 0 for key in found["lost"]}, found["left"]
    assert len(found["adopted"]) == QUICK["scripts"]
    assert found["requests_per_s"] > 10, found
