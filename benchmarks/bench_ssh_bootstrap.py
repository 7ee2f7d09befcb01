"""S1 — an SSH pool of 3 hosts: cold and warm start, and shutdown.

The hosts are the test suite's throwaway hosts (tests/hosts.py): one network namespace
each with its own sshd and private /tmp, ~/.cache and ~/.skyward, so a fresh set of
hosts has nothing installed. "Cold" opens `Compute(provider=sky.SSH(...), nodes=3,
image=Image(pip=[...], env=..., includes=...))` on fresh hosts: upload of skyward's
wheels and uv, venv, installs, `ray start` on every host, agents. "Warm" opens the same
pool again on the same hosts, which skip every install (same Image content hash). The
clock runs until the pool is open; shutdown is timed from the `with` block's exit. The
note splits an open by the pool's `BootstrapPhase` events (a per-node phase counts its
slowest node; phases of different hosts overlap, so they need not add up). The
client's own caches (the skyward wheel, dependency wheels) are warm in both cases. Needs
root and iproute2/openssh-server (scripts/system_deps.sh); otherwise the rows say why.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "S1"
TITLE = "S1 — SSH pool of 3 hosts: cold and warm start, shutdown"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")


def run(quick: bool = False) -> list[Row]:
    """One cold start and ``warm`` warm starts on one set of fresh hosts."""
    warm = 1 if quick else 3
    try:
        result = isolated(cold_and_warm, warm, timeout=900)
    except SubjectFailed as exc:
        return [failed_row(GROUP, f"3 hosts {m}", exc, metric=m) for m in ("cold start", "warm start")]
    if "skipped" in result:
        return [failed_row(GROUP, "3 hosts", f"not measured: {result['skipped']}")]
    cold_phases, warm_phases = result["phases"][0], result["phases"][1:]
    return [
        row(GROUP, "3 hosts cold start", [result["cold"]], by_phase([cold_phases]), metric="cold start"),
        row(GROUP, "3 hosts warm start", result["warm"], by_phase(warm_phases), metric="warm start"),
        row(GROUP, "3 hosts shutdown", result["shutdown"], metric="shutdown"),
    ]


def by_phase(opens: list[dict[str, float]]) -> str:
    """The phases of ``opens`` as a note: each phase's median seconds over the opens,
    longest first, those under 0.01 s left out (a phase per node counts its slowest node)."""
    names = sorted({name for phases in opens for name in phases})
    medians = {name: statistics.median(phases.get(name, 0.0) for phases in opens) for name in names}
    longest = sorted(((n, t) for n, t in medians.items() if t >= 0.01), key=lambda item: -item[1])
    shown = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in longest)
    return f"by phase: {shown}" if shown else ""


def _slowest_into(timed: dict[str, float]) -> Callable[[Any], None]:
    """A BootstrapPhase handler keeping each phase's longest duration in ``timed``."""
    def keep(event: Any) -> None:
        timed[event.phase] = max(timed.get(event.phase, 0.0), event.duration)

    return keep


def cold_and_warm(warm: int) -> dict[str, Any]:
    """Open the pool on fresh hosts once, then ``warm`` more times; seconds to open each."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available
    from local_index import PACKAGE, local_index

    import skyward as sky

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    includes = os.path.join(TESTS, "e2e", "ssh", "skyship")
    opens: list[float] = []
    closes: list[float] = []
    phases: list[dict[str, float]] = []
    with local_index() as index, HostLab.start(3) as lab:
        provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
        image = sky.Image(
            pip=[PACKAGE], pip_indexes=[sky.PipIndex(index, packages=[PACKAGE])],
            env={"BENCH": "1"}, includes=[includes],
        )
        options = sky.Options(console=False, logging=False)
        for _ in range(1 + warm):
            pool = sky.Compute(provider=provider, nodes=3, image=image, options=options)
            timed: dict[str, float] = {}
            phases.append(timed)
            pool.on(sky.BootstrapPhase, _slowest_into(timed))
            started = time.monotonic()
            pool.open()
            opens.append(time.monotonic() - started)
            started = time.monotonic()
            pool.close()
            closes.append(time.monotonic() - started)
    return {"cold": opens[0], "warm": opens[1:], "shutdown": closes, "phases": phases}
