"""The warm engine (``sky.Local(keep_warm=...)``): a script run again adopts its spare
agents, with its own environment and working directory; the engine goes away by itself
``keep_warm`` seconds after its last pool, at once on ``sky down``, and kills what a
killed client had leased; without keep_warm nothing outlives the pool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sandbox import lines_of, wait_for_no_processes

from skyward.providers import warm_client

SCRIPT = """
import os, sys, time
import skyward as sky
from skyward.providers import warm_client

@sky.function
def where():
    return os.getpid(), os.environ.get("RUN"), os.getcwd()

provider = sky.Local(keep_warm=float(sys.argv[1])) if len(sys.argv) > 1 else sky.Local()
with sky.Compute(provider=provider, nodes=2, options=sky.Options(console=False, logging=False)) as pool:
    print("NODES", where() @ pool, flush=True)
    print("DURING", [(e.pid, e.spares, e.pools) for e in warm_client.status()], flush=True)
    if len(sys.argv) > 2:
        time.sleep(600)
print("AFTER", flush=True)
"""
SPARES_WAIT = 120.0
KEYS = ("NODES", "DURING")


def run(sandbox: dict, workdir: Path, tag: str, *args: str, hold: bool = False) -> subprocess.Popen[str]:
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.py"
    script.write_text(SCRIPT)
    env = {**sandbox["env"], "RUN": tag}
    return subprocess.Popen(
        [sys.executable, str(script), *args, *(["hold"] if hold else [])], cwd=workdir, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )




def wait_for_spares(count: int) -> warm_client.EngineStatus:
    deadline = time.monotonic() + SPARES_WAIT
    while time.monotonic() < deadline:
        engines = warm_client.status()
        if engines and engines[0].spares >= count:
            return engines[0]
        time.sleep(0.2)
    raise AssertionError(f"the engine had no {count} spare agents within {SPARES_WAIT:g}s: {warm_client.status()}")




def test_a_script_run_again_adopts_spares_and_the_engine_leaves_after_keep_warm(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    first = run(sandbox, tmp_path / "a", "one", "30")
    seen = lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    assert [(run_tag, cwd) for _, run_tag, cwd in seen["NODES"]] == [("one", str(tmp_path / "a"))] * 2  # type: ignore[union-attr]
    engine = wait_for_spares(2)

    second = run(sandbox, tmp_path / "b", "two", "2")
    again = lines_of(second, "AFTER", KEYS)
    assert second.wait(30) == 0
    # the same engine lent its 2 spares to this pool: none left while it ran
    assert again["DURING"] == [(engine.pid, 0, 1)]
    nodes = again["NODES"]
    assert [(run_tag, cwd) for _, run_tag, cwd in nodes] == [("two", str(tmp_path / "b"))] * 2  # type: ignore[union-attr]
    assert not {pid for pid, _, _ in nodes} & {pid for pid, _, _ in seen["NODES"]}  # type: ignore[union-attr]

    # keep_warm=2 from the last lease: the engine, its Ray instance and spares go away by themselves
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert not psutil.pid_exists(engine.pid) or psutil.Process(engine.pid).status() == psutil.STATUS_ZOMBIE
    assert warm_client.status() == []
    assert not (Path(engine.directory) / warm_client.SOCKET).exists()


def test_a_killed_client_frees_its_spares_and_sky_down_stops_the_engine(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    first = run(sandbox, tmp_path / "a", "one", "600")
    lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    wait_for_spares(2)

    holder = run(sandbox, tmp_path / "b", "two", "600", hold=True)
    leased = [pid for pid, _, _ in lines_of(holder, "DURING", KEYS)["NODES"]]  # type: ignore[union-attr]
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    deadline = time.monotonic() + 30
    while any(psutil.pid_exists(pid) for pid in leased) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in leased if psutil.pid_exists(pid)], "the engine kept a killed client's agents"
    assert wait_for_spares(2).pools == 0

    sky = os.path.join(os.path.dirname(sys.executable), "sky")
    down = subprocess.run([sky, "down"], env=sandbox["env"], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "stopped the warm engine" in down.stdout, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=30) == []
    assert warm_client.status() == []


def test_without_keep_warm_no_engine_starts(sandbox: dict, home: Path, tmp_path: Path) -> None:
    plain = run(sandbox, tmp_path / "a", "one")
    seen = lines_of(plain, "AFTER", KEYS)
    assert plain.wait(30) == 0
    assert seen["DURING"] == []
    assert not (home / "engine").exists()
    assert wait_for_no_processes(sandbox["base"], within=30) == []


def test_bad_keep_warm_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import skyward as sky

    with pytest.raises(ValueError, match="keep_warm"):
        sky.Local(keep_warm=-1)
    monkeypatch.setenv("SKYWARD_KEEP_WARM", "soon")
    with pytest.raises(ValueError, match="SKYWARD_KEEP_WARM.*soon"):
        sky.Local()
    monkeypatch.setenv("SKYWARD_KEEP_WARM", "5")
    assert sky.Local().keep_warm == 5.0
