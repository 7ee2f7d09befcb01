"""Every script in examples/ runs: those without a dedicated test (one that names the
file) are run here, in a pipe, with a private HOME, and must exit 0 and print what they
promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(path.name for path in (ROOT / "examples").glob("*.py"))
PROMISES = {
    "quickstart.py": [
        "square(7) >> pool            = 49",
        "whoami() @ pool              = ['node 0 of 4 (head: True)'",
        "(square(3) & square(4)) >> pool = (9, 16)",
        "(square(12) > pool).result() = 144",
        "pool.map(square, range(10))  = [0, 1, 4, 9, 16, 25, 36, 49, 64, 81]",
        "sharded sum over 4 nodes = 5050 (expected 5050)",
    ],
}


def _tested_elsewhere(name: str) -> bool:
    here = Path(__file__).name
    for test_file in (ROOT / "tests").rglob("test_*.py"):
        if test_file.name != here and name in test_file.read_text():
            return True
    return False


GENERIC = [name for name in EXAMPLES if not _tested_elsewhere(name)]


@pytest.mark.parametrize("name", GENERIC)
def test_example_runs(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for promise in PROMISES.get(name, []):
        assert promise in done.stdout, f"{name} did not print {promise!r}:\n{done.stdout}"


def test_every_generic_example_states_what_it_prints() -> None:
    missing = [name for name in GENERIC if name not in PROMISES]
    assert not missing, f"add the expected output of {missing} to PROMISES, or give them a dedicated test"
