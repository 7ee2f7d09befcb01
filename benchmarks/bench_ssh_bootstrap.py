"""S1 — an SSH pool of 3 hosts: cold and warm start, and shutdown.

The hosts are the test suite's throwaway hosts (tests/hosts.py): one network namespace
each with its own sshd and private /tmp, ~/.cache and ~/.skyward, so a fresh set of
hosts has nothing installed. "Cold" opens `Compute(provider=sky.SSH(...), nodes=3,
image=Image(pip=[...], env=..., includes=...))` on fresh hosts: upload of skyward's
wheels and uv, venv, installs, `ray start` on every host, agents. "Warm" opens the same
pool again on the same hosts, which skip every install (same Image content hash). The
clock runs until the pool is open; shutdown is timed from the `with` block's exit. The
client's own caches (the skyward wheel, dependency wheels) are warm in both cases. Needs
root and iproute2/openssh-server (scripts/system_deps.sh); otherwise the rows say why.
"""

from __future__ import annotations

import os
import sys
import time
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
    return [
        row(GROUP, "3 hosts cold start", [result["cold"]], metric="cold start"),
        row(GROUP, "3 hosts warm start", result["warm"], metric="warm start"),
        row(GROUP, "3 hosts shutdown", result["shutdown"], metric="shutdown"),
    ]


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
    with local_index() as index, HostLab.start(3) as lab:
        provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
        image = sky.Image(
            pip=[PACKAGE], pip_indexes=[sky.PipIndex(index, packages=[PACKAGE])],
            env={"BENCH": "1"}, includes=[includes],
        )
        options = sky.Options(console=False, logging=False)
        for _ in range(1 + warm):
            pool = sky.Compute(provider=provider, nodes=3, image=image, options=options)
            started = time.monotonic()
            pool.open()
            opens.append(time.monotonic() - started)
            started = time.monotonic()
            pool.close()
            closes.append(time.monotonic() - started)
    return {"cold": opens[0], "warm": opens[1:], "shutdown": closes}
