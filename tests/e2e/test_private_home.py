"""Nothing under skyward's home is another user's to read: after a local pool with its
default log file and a kept pool (the pool daemon's files) in a fresh home, every
directory there is 0700 and every file 0600 (sockets included), an existing 0755
``~/.skyward`` was narrowed, and the unprivileged ``skyward-probe`` account can neither
list a directory nor read a file of it (docs/security.md)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from sandbox import wait_for_no_processes
from stranger import Probe

SCRIPT = """
import skyward as sky

@sky.function
def shout():
    print("a line a task printed", flush=True)
    return 1

with sky.Compute(nodes=1, console=False) as pool:
    assert (shout() >> pool) == 1
with sky.Compute(nodes=1, keep_alive=600, console=False) as pool:
    assert (shout() >> pool) == 1
print("DONE", flush=True)
"""
SKY = str(Path(sys.executable).parent / "sky")


def test_a_fresh_home_after_a_pool_holds_nothing_another_user_can_read(
    sandbox: dict, tmp_path: Path, probe: Probe
) -> None:
    env = {key: value for key, value in sandbox["env"].items() if key != "SKYWARD_HOME"}
    home = Path(sandbox["home"]) / ".skyward"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # as an older version, or the user's umask, left it
    (tmp_path / "script.py").write_text(SCRIPT)
    try:
        done = subprocess.run(
            [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
            check=False,
        )
        assert done.returncode == 0 and "DONE" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
        entries = [home, *home.rglob("*")]
        assert any(path.name == "skyward.log" for path in entries), entries  # the default log file is there
        assert "a line a task printed" in (home / "logs" / "skyward.log").read_text()
        assert any(path.parent.name == "daemon" for path in entries), entries
        loose = {
            str(path): stat.filemode(path.lstat().st_mode) for path in entries
            if path.lstat().st_mode & 0o077 or not (path.is_dir() or path.lstat().st_mode & 0o600 == 0o600)
        }
        assert loose == {}, "group or others may read these, or they are not the user's to read and write"
        directories = [str(path) for path in entries if path.is_dir()]
        files = [str(path) for path in entries if path.is_file()]
        listed = probe.run({"op": "directories", "paths": directories})
        assert {path: tries["list"] for path, tries in listed.items() if tries["list"] != "EACCES"} == {}
        read = probe.run({"op": "read", "paths": files})
        assert {path: result for path, result in read.items() if result != "EACCES"} == {}
    finally:
        subprocess.run([SKY, "down", "--all"], env=env, capture_output=True, timeout=180, check=False)
    assert wait_for_no_processes(sandbox["base"], within=60) == []


NAMED = """
import skyward as sky

@sky.function
def shout():
    print("a line a task printed", flush=True)
    return 1

with sky.Compute(nodes=1, name="homed", console=False) as pool:
    assert (shout() >> pool) == 1
print("DONE", flush=True)
"""


def test_logs_follow_skyward_home(sandbox: dict, tmp_path: Path) -> None:
    """With ``SKYWARD_HOME`` set, the default log file, the pool's own log and ``sky logs``
    are all there, and nothing is written under ``~/.skyward``."""
    elsewhere = tmp_path / "skyhome"
    env = {**sandbox["env"], "SKYWARD_HOME": str(elsewhere)}
    (tmp_path / "script.py").write_text(NAMED)
    done = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0 and "DONE" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "a line a task printed" in (elsewhere / "logs" / "skyward.log").read_text()
    assert not (Path(sandbox["home"]) / ".skyward").exists(), sorted(map(str, (Path(sandbox["home"]) / ".skyward").rglob("*")))
    logs = subprocess.run([SKY, "logs", "homed"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert logs.returncode == 0 and "a line a task printed" in logs.stdout, logs.stdout[-2000:] + logs.stderr[-2000:]
    pool_logs = list((elsewhere / "logs" / "pools").glob("*"))
    assert any("a line a task printed" in path.read_text() for path in pool_logs), pool_logs  # the pool's own log
    assert wait_for_no_processes(sandbox["base"], within=60) == []
