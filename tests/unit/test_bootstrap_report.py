"""The bootstrap script keeps what an environment reported (where skyward is, the
versions a client checks) and makes it again only when the environment changed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import skyward as sky
from skyward.image.script import Artifacts, env_dir, render

FAKE_PYTHON = """#!/bin/sh
echo started >> "$STARTS"
echo "::site $SITE"
echo '::versions {"python": "3.11"}'
"""


def _environment(home: Path) -> tuple[str, Path]:
    """A bootstrap script's prelude and the site-packages of its environment, whose
    Python is a stand-in that counts its starts in ``$STARTS``."""
    image = sky.Image()
    artifacts = Artifacts("skyward-0.1.0-py3-none-any.whl", "key", None, "")
    script = render(image, artifacts, str(home / "pool"), 60)
    prelude = script[: script.index("\ntake_lock\n")]
    env = Path(env_dir(image, artifacts).replace("$HOME", str(home)))
    python = env / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    packages = env / "venv" / "lib" / "python3.11" / "site-packages"
    (packages / "skyward").mkdir(parents=True)
    (packages / "skyward" / "__init__.py").write_text("")
    (packages / "cloudpickle-3.1.0.dist-info").mkdir()
    return prelude, packages


def _report(home: Path, prelude: str, packages: Path) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "STARTS": str(home / "starts"), "SITE": str(packages / "skyward")}
    done = subprocess.run(["bash", "-c", prelude + "\nreport\n"], env=env, capture_output=True, text=True, timeout=30, check=True)
    return "".join(line + "\n" for line in done.stdout.splitlines() if not line.startswith("::env "))


def _starts(home: Path) -> int:
    path = home / "starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _later(path: Path, than: Path) -> None:
    """Give ``path`` an mtime a second after ``than``'s."""
    after = than.stat().st_mtime + 1
    os.utime(path, (after, after))


def test_a_report_is_kept_and_made_again_when_the_environment_changes(tmp_path: Path) -> None:
    prelude, packages = _environment(tmp_path)
    first = _report(tmp_path, prelude, packages)
    assert first == f"::site {packages / 'skyward'}\n" + '::versions {"python": "3.11"}\n'
    assert _starts(tmp_path) == 1
    kept = next(tmp_path.glob(".cache/skyward/envs/*/.report"))

    assert _report(tmp_path, prelude, packages) == first
    assert _starts(tmp_path) == 1, "an unchanged environment started its Python again"

    (packages / "__pycache__").mkdir()  # what imports write there changes nothing reported
    (packages / "skyward" / "__pycache__").mkdir()
    _later(packages, kept)
    _later(packages / "skyward", kept)
    assert _report(tmp_path, prelude, packages) == first
    assert _starts(tmp_path) == 1

    installed = packages / "cloudpickle-3.1.1.dist-info"  # a package installed or upgraded
    installed.mkdir()
    _later(installed, kept)
    assert _report(tmp_path, prelude, packages) == first
    assert _starts(tmp_path) == 2

    changed = packages / "skyward" / "__init__.py"  # skyward's copy no longer the one reported
    changed.write_text("# not the client's copy\n")
    _later(changed, kept)
    assert _report(tmp_path, prelude, packages) == first
    assert _starts(tmp_path) == 3
