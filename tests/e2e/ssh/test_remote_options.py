"""Options and Spec fields keep their promises on SSH pools: a streamed map yields early,
``ttl=0`` does not kill a live pool, a killed client's pool goes away ``ttl`` seconds
later, ``bootstrap_timeout`` is enforced on the hosts, the hardware checks name what is
missing, and a failing install shows the command and its own output."""

from __future__ import annotations

import os
import platform
import re
import selectors
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import QUIET, env_locks, host_processes, make_image, pool_traces, ssh_provider, strays, wait_for
from hosts import HostLab
from sandbox import own_home

import skyward as sky

OTHER_ARCHITECTURE = {"x86_64": "arm64", "aarch64": "x86_64", "arm64": "x86_64"}


@sky.function
def node_process() -> tuple[int, str, int]:
    """Which node answered, on which host, from which process."""
    info = sky.instance_info()
    return info.node, platform.node(), os.getpid()


def timed(x: int) -> tuple[int, float, float]:
    """Item ``x`` with the wall-clock times it started and ended (the hosts share this
    machine's clock). The first two items are quick, the rest take a second each."""
    import time

    started = time.time()
    time.sleep(0.05 if x < 2 else 1.0)
    return x, started, time.time()


def test_streamed_map_yields_while_later_items_run(ssh_pool: sky.Pool) -> None:
    """``pool.map(..., stream=True)`` hands over the first results while later items are
    still running on the nodes, not all of them at the end."""
    started = time.time()
    arrivals: list[float] = []
    results = []
    for result in ssh_pool.map(timed, range(14), stream=True):
        arrivals.append(time.time())
        results.append(result)
    assert [r[0] for r in results] == list(range(14))
    first, end = arrivals[0] - started, arrivals[-1] - started
    last_item_done = max(r[2] for r in results) - started
    timings = f"first result after {first:.2f}s, last after {end:.2f}s, last item finished at {last_item_done:.2f}s"
    assert end >= 3.0, f"the map was too quick to show anything: {timings}"
    assert first < end / 2 and end - first >= 2.0, f"the first result came late: {timings}"
    assert last_item_done - first >= 1.0, f"no item was still running when the first result arrived: {timings}"


def test_ttl_zero_keeps_a_live_pool_and_closes_cleanly(lab: HostLab, index: str) -> None:
    """``Spec(ttl=0)`` stops a pool at once when its client goes, but a live client's
    pool stays usable past the watchdog's silence limit, and closes leaving nothing."""
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, ttl=0, image=make_image(index), options=QUIET)
    with pool:
        opened = time.monotonic()
        before = sorted(node_process() @ pool)
        # Idle on purpose: the watchdogs' silence limit is 6 s (3 heartbeats).
        time.sleep(max(0.0, 6.5 - (time.monotonic() - opened)))
        assert sorted(node_process() @ pool) == before, "the nodes' processes were stopped and replaced"
        assert pool.map(lambda x: x + 1, range(9)) == list(range(1, 10))
    traces = pool_traces(lab, pool.id)
    assert not any(traces.values()), f"left on the hosts after close: {traces}"


@pytest.mark.slow
def test_killed_client_leaves_nothing_after_ttl(lab: HostLab, tmp_path: Path) -> None:
    """A client killed with SIGKILL (no teardown runs) leaves nothing on the hosts
    ``ttl`` seconds later: the watchdogs notice the closed connection and clean up."""
    ttl = 2
    script = textwrap.dedent(f"""
        import time
        import skyward as sky
        provider = sky.SSH(hosts={lab.strings()!r}, key_path={lab.client_key!r}, known_hosts={lab.known_hosts!r})
        pool = sky.Compute(provider=provider, nodes=3, ttl={ttl}, options=sky.Options(console=False, logging=False))
        pool.open()
        print("OPEN", pool.id, flush=True)
        time.sleep(600)
    """)
    before = host_processes(lab)
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=own_home(tmp_path))
    try:
        line = wait_for_line(client, timeout=240)
        assert line.startswith("OPEN"), f"the client did not open its pool: {line!r}"
        pool_id = line.split()[1]
        assert pool_traces(lab, pool_id)["processes"], "the pool runs nothing on the hosts"
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        killed = time.monotonic()
        gone = wait_for(
            lambda: not any(pool_traces(lab, pool_id).values()) and not strays(lab, before, pool_id), timeout=ttl + 15
        )
        waited = time.monotonic() - killed
        left = {**pool_traces(lab, pool_id), "strays": strays(lab, before, pool_id)}
        assert gone, f"still on the hosts {waited:.1f}s after the client died (ttl={ttl}): {left}"
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(timeout=10)


def wait_for_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The process's next stdout line, or "" if it exits or ``timeout`` passes first."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def test_bootstrap_timeout_is_enforced_on_the_hosts(lab: HostLab, index: str, ssh_pool: sky.Pool) -> None:
    """``Options(bootstrap_timeout=5)`` with a shell_vars snippet that hangs: opening fails
    with TimeoutError soon after, and the host-side ``timeout`` killed the snippet (and
    released the env lock). Uses ssh_pool's Image, so the hosts are warm and the time
    runs out in the shell_vars phase, with ``sleep 300`` running."""
    base = make_image(index)
    image = sky.Image(
        pip=list(base.pip), pip_indexes=list(base.pip_indexes), env=dict(base.env),
        includes=list(base.includes), shell_vars={**base.shell_vars, "X": "sleep 300"},
    )
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, image=image, options=QUIET.with_(bootstrap_timeout=5))
    started = time.monotonic()
    with pytest.raises(TimeoutError) as failure:
        with pool:
            pass
    elapsed = time.monotonic() - started
    assert elapsed < 20, f"opening took {elapsed:.1f}s to give up on a 5 s bootstrap timeout"
    assert "within 5s" in str(failure.value) and "'shell_vars'" in str(failure.value), str(failure.value)
    left = wait_for(lambda: not lab.processes_naming("sleep 300"), timeout=5)
    assert left, f"`sleep 300` still runs on the hosts: pids {lab.processes_naming('sleep 300')}"
    assert env_locks(lab) == [], "the killed bootstrap left its env lock behind"
    traces = pool_traces(lab, pool.id)
    assert not any(traces.values()), f"left on the hosts: {traces}"


def _meminfo_gb() -> float:
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
    return round(kb / 1024**2, 1)


HARDWARE = {
    "vcpus": (10_000, lambda: f"it has {os.sysconf('SC_NPROCESSORS_ONLN')} CPUs"),
    "memory_gb": (10_000, lambda: f"it has {_meminfo_gb()} GB of memory"),
    "disk_gb": (10_000_000, lambda: "GB free in its home directory"),  # and the amount: see the test
    "architecture": (
        OTHER_ARCHITECTURE.get(platform.machine(), "arm64"),
        lambda: f"it is {'arm64' if platform.machine() in ('aarch64', 'arm64') else platform.machine()}",
    ),
}


@pytest.mark.parametrize("field", sorted(HARDWARE))
def test_hardware_the_hosts_lack_is_refused_at_open(lab: HostLab, field: str) -> None:
    """A Spec asking for more (or other) hardware than the hosts have fails at open with a
    ValueError naming the node and host, the field, the wanted and the found value."""
    wanted, found = HARDWARE[field]
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, options=QUIET, **{field: wanted})
    with pytest.raises(ValueError) as failure:
        with pool:
            pass
    message = str(failure.value)
    assert f"Spec.{field}={wanted!r}" in message, message
    assert f"node 0 ({lab.strings()[0]})" in message, message
    assert found() in message, message
    if field == "disk_gb":  # free space moves while tests run: roughly what df says here
        free = float(re.search(r"it has ([\d.]+) GB free", message).group(1))  # type: ignore[union-attr]
        assert abs(free - shutil.disk_usage("/root").free / 1024**3) < 2, message
    traces = pool_traces(lab, pool.id)
    assert not any(traces.values()), f"left on the hosts: {traces}"


def test_failing_install_shows_the_command_and_uv_output(lab: HostLab, index: str) -> None:
    """A package no index has: opening fails with the failing ``uv pip install`` command
    and uv's own explanation, not an empty "Output:"."""
    missing = "no-such-package-skyward-test"
    image = sky.Image(pip=[missing], pip_indexes=[sky.PipIndex(index, packages=[missing])])
    pool = sky.Compute(provider=ssh_provider(lab, hosts=lab.strings()[:1]), nodes=1, image=image, options=QUIET)
    with pytest.raises(RuntimeError) as failure:
        with pool:
            pass
    message = str(failure.value)
    assert "failed in phase 'pip'" in message, message
    command = next((line for line in message.splitlines() if "`" in line), "")
    assert "uv pip install" in command and missing in command and index in command, message
    output = message.split("Output:\n", 1)[-1]
    assert output.strip() and "printed nothing" not in output, message
    # uv's own report: "No solution found" where the index is all it may use, else (as
    # here: uv also tries PyPI, which the hosts cannot reach) why the request failed.
    assert missing in output and ("error:" in output or "×" in output), message
    assert env_locks(lab) == [], "the failed bootstrap left its env lock behind"
    traces = pool_traces(lab, pool.id)
    assert not any(traces.values()), f"left on the hosts: {traces}"
