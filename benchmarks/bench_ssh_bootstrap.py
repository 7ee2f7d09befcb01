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
client's own caches (the skyward wheel, dependency wheels) are warm in both cases. Then
a script with `keep_alive` that calls a function it defines runs as a fresh interpreter
again and again on the same hosts: the first run opens the pool (not counted), each
later one adopts it. Its rows are given twice: from `sky.Compute(...)` to every node's
first answer, and with the script's `import skyward` before it, which the user waits
for as well. Needs root and iproute2/openssh-server (scripts/system_deps.sh); otherwise
the rows say why.
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
        *kept_rows(GROUP, "3 hosts kept pool, the script run again", result["kept"]),
    ]


def kept_rows(group: str, subject: str, kept: list[dict[str, Any]]) -> list[Row]:
    """Two rows of a kept pool's runs (as ``kept_runs`` returns them): from
    ``sky.Compute(...)`` to every node's first answer, and the same with the script's
    ``import skyward`` before it, which the user waits for as well."""
    without_ray = not any(run["ray"] for run in kept)
    client = "no Ray in the client" if without_ray else "the client imported Ray"
    return [
        row(group, subject, [run["open"] for run in kept], f"keep_alive; `import skyward` not counted; {client}",
            metric="kept", facts={"without_ray": without_ray}),
        row(group, f"{subject}, with `import skyward`", [run["import"] + run["open"] for run in kept],
            f"keep_alive; {client}", metric="kept+import"),
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
        kept = kept_runs(KEPT_SCRIPT.format(
            hosts=list(provider.hosts), key=provider.key_path, known=provider.known_hosts,
            pip=list(image.pip), index=image.pip_indexes[0].url, includes=image.includes[0],
        ), 1 + warm)
    return {"cold": opens[0], "warm": opens[1:], "shutdown": closes, "phases": phases, "kept": kept[1:]}


KEPT_SCRIPT = """
import json, os, sys, time
began = time.perf_counter()
import skyward as sky
imported = time.perf_counter() - began
provider = sky.SSH(hosts={hosts!r}, key_path={key!r}, known_hosts={known!r})
image = sky.Image(pip={pip!r}, pip_indexes=[sky.PipIndex({index!r}, packages={pip!r})], env={{"BENCH": "1"}},
                  includes=[{includes!r}])
@sky.function
def pid():
    return os.getpid()
started = time.perf_counter()
with sky.Compute(provider=provider, nodes=3, image=image, keep_alive=120, console=False, logging=False) as pool:
    assert len(pid() @ pool) == 3
    first = time.perf_counter() - started
print(json.dumps({{"import": imported, "open": first, "ray": "ray" in sys.modules}}))
"""


def kept_runs(script: str, runs: int, extra_env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The kept-pool ``script`` run ``runs`` times as fresh interpreters with a private
    $SKYWARD_HOME and ``extra_env`` (the first run opens the pool): the JSON object each
    printed last (``import``: seconds of its ``import skyward``; ``open``: seconds from
    ``sky.Compute`` to every node's first answer; ``ray``: whether it imported Ray);
    then the kept pool and its daemon are ended."""
    import json
    import subprocess
    import tempfile

    from skyward.providers.daemon_client import end_pools, stop_all

    with tempfile.TemporaryDirectory(prefix="skybench-kept-") as home:
        env = {**os.environ, **(extra_env or {}), "SKYWARD_HOME": home}
        found: list[dict[str, Any]] = []
        try:
            for _ in range(runs):
                done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      timeout=600)
                if done.returncode != 0:
                    raise RuntimeError(f"the kept-pool script failed: {done.stderr[-1500:]}")
                found.append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            saved = os.environ.get("SKYWARD_HOME")
            os.environ["SKYWARD_HOME"] = home
            try:
                end_pools("")
                stop_all()
            finally:
                if saved is None:
                    os.environ.pop("SKYWARD_HOME", None)
                else:
                    os.environ["SKYWARD_HOME"] = saved
        return found
