"""A copy of the checkout as a user has it: skyward installed by pip, not editable, into a
venv of its own, and the checkout's other tracked files (tests, examples, docs) beside it
with no ``skyward/`` of their own, so ``import skyward`` there is the installed package;
its ``.git`` names the checkout's, so git sees the same commit there (the CI rotations
of the suite take their turn from its day).

The venv's other packages are the dev venv's, hard-linked (no download, no index): not a
``.pth`` line naming the dev venv's site-packages, since skyward's by-value pickling
(engine/wire.py) takes every module from outside the interpreter's own prefix for the
user's code, and crashes on modules registered under two names (requests' urllib3
aliases; tests/unit/test_wire_by_value.py). The remote stream of ``scripts/test.sh`` runs from such a copy, so every SSH
and cloud pool of the suite has an installed client, whose nodes get a wheel written
from its installed files.

    python tests/installed_copy.py ROOT    # makes ROOT/venv and ROOT/<tracked files>
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV_SKYWARD = ("__editable__", "skyward")
"""The dev venv's own (editable) skyward, left out of the copy's venv."""


@dataclass(frozen=True)
class InstalledVenv:
    python: str
    site_packages: str


def installed_venv(source: str, venv: str) -> InstalledVenv:
    """A venv at ``venv`` with skyward pip-installed from ``source`` (a directory with its
    ``pyproject.toml``), NON-editable, and the dev venv's other packages hard-linked.
    RuntimeError naming the command that failed."""
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = os.path.join(venv, "bin", "python")
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    dev = sysconfig.get_paths()["purelib"]
    for name in os.listdir(dev):
        if not name.startswith(DEV_SKYWARD):
            _link_tree(os.path.join(dev, name), os.path.join(site, name))
    _run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation", source])
    where = _run([python, "-c", "import skyward; print(skyward.__file__)"], cwd=venv).strip()
    if where != os.path.join(site, "skyward", "__init__.py"):
        raise RuntimeError(f"the venv at {venv} imports skyward from {where}, not its site-packages")
    return InstalledVenv(python, site)


def make(root: str) -> str:
    """The checkout's files (tracked, and untracked ones git does not ignore) but
    skyward's at ``root``, and skyward installed in ``root/venv`` (``installed_venv``)
    from a copy of its own; the venv's python."""
    listed = _run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    source = os.path.join(root, ".source")
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            _copy(name, source if name.startswith("skyward/") else root)
    for name in ("pyproject.toml", "README.md"):
        _copy(name, source)
    git_dir = _run(["git", "-C", str(REPO), "rev-parse", "--absolute-git-dir"]).strip()
    with open(os.path.join(root, ".git"), "w", encoding="utf-8") as file:  # the copy's commit is the checkout's
        file.write(f"gitdir: {git_dir}\n")  # (tests/e2e/cloud/rotation.py reads its day)
    try:
        return installed_venv(source, os.path.join(root, "venv")).python
    finally:
        shutil.rmtree(source, ignore_errors=True)


def _copy(name: str, into: str) -> None:
    target = os.path.join(into, name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy2(REPO / name, target)


def _link_tree(source: str, target: str) -> None:
    """Hard links of ``source`` (a file or a tree) at ``target``; copies across devices."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    if os.path.isdir(source) and not os.path.islink(source):
        shutil.copytree(source, target, symlinks=True, copy_function=link)
    else:
        link(source, target)


def _run(command: list[str], cwd: str | None = None) -> str:
    """``command``'s output, run without ``PYTHONPATH`` (a checkout named there would shadow
    the installed package)."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


if __name__ == "__main__":
    print(make(sys.argv[1]))
