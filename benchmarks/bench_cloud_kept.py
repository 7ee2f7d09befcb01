"""K — a kept pool on an emulated cloud: the same script run again.

DigitalOcean's local fake (tests/cloud/fake_digitalocean.py, its HTTP API as documented),
whose Droplets are the test suite's throwaway hosts (tests/hosts.py), serves
`sky.DigitalOcean()`. A script with `keep_alive` runs as a fresh interpreter each time:
the first run creates 2 Droplets and opens the pool on them (not counted); each later
run adopts it through the pool daemon. The script calls a function it defines. Its rows
are the seconds from `sky.Compute(...)` to every node's first answer, and the same with
the script's `import skyward` before it, which the user waits for as well; the note says
whether the script imported Ray. Needs root and iproute2/openssh-server
(scripts/system_deps.sh); otherwise the row says why.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from benchmarks.bench_ssh_bootstrap import kept_rows, kept_runs
from benchmarks.common import Row, failed_row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "K"
TITLE = "K — a kept pool on an emulated cloud (DigitalOcean's fake), the script run again"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
SUBJECT = "2 Droplets kept pool, the script run again"
SCRIPT = """
import json, os, sys, time
began = time.perf_counter()
import skyward as sky
imported = time.perf_counter() - began
options = sky.Options(console=False, logging=False, ssh_retry_interval=1, keep_alive=120)
@sky.function
def pid():
    return os.getpid()
started = time.perf_counter()
with sky.Compute(provider=sky.DigitalOcean(), vcpus=2, nodes=2, options=options) as pool:
    assert len(pid() @ pool) == 2
    first = time.perf_counter() - started
print(json.dumps({"import": imported, "open": first, "ray": "ray" in sys.modules}))
"""


def run(quick: bool = False) -> list[Row]:
    runs = 2 if quick else 5
    try:
        result = isolated(measure, runs, timeout=900)
    except SubjectFailed as exc:
        return [failed_row(GROUP, SUBJECT, exc, metric="kept")]
    if "skipped" in result:
        return [failed_row(GROUP, SUBJECT, f"not measured: {result['skipped']}", metric="kept")]
    return kept_rows(GROUP, SUBJECT, result["kept"])


def measure(runs: int) -> dict[str, Any]:
    """Open the kept pool on the fake cloud, then run the script ``runs`` more times."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from cloud.fake_digitalocean import FakeDigitalOcean
    from cloud.machines import Harness
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    with HostLab.start(2) as lab:
        fake = FakeDigitalOcean()
        fake.use_subnet(lab.cidr)
        fake.start()
        harness = Harness(lab, fake).start()
        try:
            kept = kept_runs(SCRIPT, 1 + runs, fake.env())
        finally:
            harness.stop()
            fake.stop()
    return {"kept": kept[1:]}


if __name__ == "__main__":
    for found in run(quick="--quick" in sys.argv):
        print(found)
