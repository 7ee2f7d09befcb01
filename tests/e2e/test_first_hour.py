"""A newcomer's first hour, as the README has it: ``scripts/quickstart.sh`` in a fresh
copy of the repository (skyward installed from a wheel into the copy's own venv, as a
user installs it), run twice (the second run does not install again), then, with that
venv, the mistakes a newcomer makes first in a script of their own and at the command
line. Nothing prints a warning of ours or a frame of skyward's; each mistake ends in one
message that names the fix.

Needs the package index (or pip's cache), as the README's first command does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_TIMEOUT = 900.0
MISSPELT = """
import skyward as sky

with sky.Compute(nodes=2, keepalive=60) as pool:
    pass
"""
UNPICKLABLE = """
import threading

import skyward as sky

@sky.function
def locked(lock):
    return lock

with sky.Compute(nodes=1, console=False, logging=False) as pool:
    locked(threading.Lock()) >> pool
"""
FAILING = """
import skyward as sky

@sky.function
def ratio(x):
    return 1 / x

with sky.Compute(nodes=1, console=False, logging=False) as pool:
    print(pool.map(ratio, [1, 2, 0]))
"""


def ours(text: str) -> list[str]:
    """Lines of ``text`` that are a warning or a traceback frame of skyward's: a Python
    warning (``...Warning:``, setuptools' among them, which builds our wheel) or a frame
    in an installed skyward file, but the one frame that says how to see the rest. pip's
    own notes (``WARNING: ...`` about its index or the root user) are not ours."""
    found = []
    for line in text.splitlines():
        frame = re.search(r'File "([^"]+)", line \d+', line)
        path = frame[1] if frame else ""
        our_frame = f"{os.sep}skyward{os.sep}" in path and not path.endswith(os.path.join("core", "frames.py"))
        warning = re.search(r"\w+Warning\b", line) is not None and not line.startswith("WARNING: ")
        if our_frame or warning:
            found.append(line)
    return found


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The repository's files as a fresh clone has them (tracked and not ignored); removed
    afterwards with the venv the quickstart makes in it."""
    target = tmp_path_factory.mktemp("first-hour") / "skyward"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    yield target
    shutil.rmtree(target.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def quickstart(copy: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The README's first command, run twice in the copy, with a $SKYWARD_HOME of its own
    (HOME stays: pip's configuration and cache are the user's)."""
    env = {**os.environ, "SKYWARD_HOME": str(copy.parent / "skyward-home"),
           "PYTHON": getattr(sys, "_base_executable", sys.executable), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    runs = [
        subprocess.run(["bash", "scripts/quickstart.sh"], cwd=copy, env=env, capture_output=True, text=True,
                       timeout=QUICKSTART_TIMEOUT, check=False)
        for _ in range(2)
    ]
    return runs[0], runs[1]


def test_the_quickstart_installs_once_runs_and_warns_about_nothing_of_ours(quickstart: tuple) -> None:
    first, again = quickstart
    for done in (first, again):
        shown = done.stdout + done.stderr
        assert done.returncode == 0, shown[-3000:]
        assert "sharded sum over 4 nodes = 5050 (expected 5050)" in done.stdout, shown[-3000:]
        assert ours(shown) == [] and "Traceback" not in shown, shown[-3000:]
    assert "quickstart: installing skyward" in first.stdout, first.stdout
    assert "is installed and up to date" in again.stdout and "installing" not in again.stdout, again.stdout


@pytest.mark.parametrize(("script", "message"), [
    (MISSPELT, "keepalive"),
    (UNPICKLABLE, "lock"),
    (FAILING, "ZeroDivisionError: division by zero"),
], ids=["misspelt-keyword", "unpicklable-argument", "failing-item"])
def test_a_newcomers_mistake_ends_in_one_message_of_theirs(
    quickstart: tuple, copy: Path, sandbox: dict, script: str, message: str
) -> None:
    (Path(sandbox["tmp"]) / "mine.py").write_text(script)
    done = subprocess.run([str(copy / ".venv" / "bin" / "python"), "mine.py"], cwd=sandbox["tmp"],
                          env=sandbox["env"], capture_output=True, text=True, timeout=300, check=False)
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert ours(shown) == [], shown
    assert message in "\n".join(done.stderr.rstrip().splitlines()[-2:]), shown  # the exception's own lines
    if script is MISSPELT:
        assert "did you mean" in done.stderr and "keep_alive" in done.stderr, shown


def test_the_command_line_answers_a_newcomer(quickstart: tuple, copy: Path, sandbox: dict) -> None:
    sky = str(copy / ".venv" / "bin" / "sky")
    for command, status, message in (
        (["-h"], 0, "Commands:"),
        (["ls"], 0, ""),
        (["version"], 0, "skyward"),
        (["lss"], 2, "Did you mean one of: 'ls'"),
        (["logs", "nothing-here"], 1, "no log of pool 'nothing-here'"),
    ):
        done = subprocess.run([sky, *command], env=sandbox["env"], capture_output=True, text=True, timeout=120,
                              check=False)
        shown = done.stdout + done.stderr
        assert done.returncode == status and message in shown, (command, shown)
        assert ours(shown) == [] and "Traceback" not in shown, (command, shown)
