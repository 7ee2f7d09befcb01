"""``sky.Local(keep_warm=...)`` keeps the pool (docs/kept-pools.md): a script run again
adopts the same node processes, the pool ends ``keep_warm`` seconds after the last
script left it and the daemon with it, ``sky down`` ends it at once, a pool that cannot
be kept is refused naming keep_warm, and without keep_warm nothing outlives the pool."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from sandbox import lines_of, wait_for_no_processes

from skyward.providers import daemon_client

SCRIPT = """
import os, sys
import skyward as sky
from skyward.providers import daemon_client

@sky.function
def where():
    return os.getpid(), os.getcwd()

provider = sky.Local(keep_warm=float(sys.argv[1])) if len(sys.argv) > 1 else sky.Local()
with sky.Compute(provider=provider, nodes=2, options=sky.Options(console=False, logging=False)) as pool:
    print("NODES", where() @ pool, flush=True)
    print("DURING", [e.pid for e in daemon_client.status()], flush=True)
print("AFTER", flush=True)
"""
KEYS = ("NODES", "DURING")


def run(sandbox: dict, workdir: Path, *args: str) -> subprocess.Popen[str]:
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.py"
    script.write_text(SCRIPT)
    return subprocess.Popen(
        [sys.executable, str(script), *args], cwd=workdir, env=sandbox["env"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def test_a_script_run_again_adopts_the_pool_which_ends_keep_warm_seconds_after(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    first = run(sandbox, tmp_path, "8")
    seen = lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    [daemon] = daemon_client.status()
    assert seen["DURING"] == [daemon.pid]
    [kept] = daemon_client.kept_pools()
    assert kept.keep_alive == 8.0 and kept.holder == 0

    second = run(sandbox, tmp_path, "8")
    again = lines_of(second, "AFTER", KEYS)
    assert second.wait(30) == 0
    assert again["NODES"] == seen["NODES"], "the second run did not adopt the same node processes"
    assert [path for _, path in again["NODES"]] == [str(tmp_path)] * 2  # type: ignore[union-attr]

    # 8 s after the second script left it: the pool ends, and the daemon and its Ray with it
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert not psutil.pid_exists(daemon.pid) or psutil.Process(daemon.pid).status() == psutil.STATUS_ZOMBIE
    assert daemon_client.status() == []
    assert not (Path(daemon.directory) / daemon_client.SOCKET).exists()


def test_sky_down_ends_a_pool_kept_by_keep_warm(sandbox: dict, home: Path, tmp_path: Path) -> None:
    first = run(sandbox, tmp_path, "600")
    lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    assert len(daemon_client.kept_pools()) == 1

    sky = os.path.join(os.path.dirname(sys.executable), "sky")
    down = subprocess.run([sky, "down"], env=sandbox["env"], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "stopped the pool daemon" in down.stdout, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=30) == []
    assert daemon_client.status() == []


def test_without_keep_warm_no_daemon_starts(sandbox: dict, home: Path, tmp_path: Path) -> None:
    plain = run(sandbox, tmp_path)
    seen = lines_of(plain, "AFTER", KEYS)
    assert plain.wait(30) == 0
    assert seen["DURING"] == []
    assert not (home / "daemon").exists()
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
    # a kept pool keeps node 0: keep_warm on a pool that may scale to zero is refused, not ignored
    with pytest.raises(ValueError, match=r"keep_warm=5\b.*SKYWARD_KEEP_WARM.*node 0.*keep_warm=0"):
        sky.Compute(provider=sky.Local(), nodes=sky.Nodes(desired=1, min=0, max=2))
    assert sky.Compute(provider=sky.Local(), nodes=sky.Nodes(desired=1, max=2)).options.keep_alive == 5.0
    assert sky.Compute(provider=sky.Local(keep_warm=5), nodes=2).options.keep_alive == 5.0
    assert sky.Compute(provider=sky.Local(keep_warm=5), nodes=2, keep_alive=9).options.keep_alive == 9.0
