"""skyward's packages import only downward (the layers contract of pyproject.toml, written
out in docs/architecture.md), and an upward import planted in a copy of the package breaks
it, whether it sits in a function or behind TYPE_CHECKING. The ground package's own check
runs from an installed copy too."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

import skyward

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "skyward"

CORE = Path(skyward.__file__).parent / "core"
needs_checkout = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").is_file() or not PACKAGE.is_dir(),
    reason="needs the source checkout (the tests run here from an installed copy)",
)


def _skyward_imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [name for name in names if name == "skyward" or name.startswith("skyward.")]


def test_the_ground_package_imports_nothing_above_it() -> None:
    upward = {
        str(path.name): [name for name in _skyward_imports(path) if not name.startswith("skyward.core")]
        for path in CORE.glob("*.py")
    }
    assert {name: found for name, found in upward.items() if found} == {}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    command = [str(script)] if script.is_file() else [shutil.which("lint-imports") or "lint-imports"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [*command, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@needs_checkout
def test_the_layers_contract_is_kept() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


@needs_checkout
def test_nothing_inside_imports_the_package_root() -> None:
    """``skyward/__init__.py`` is the public surface on top: no module of skyward imports it."""
    graph = grimp.build_graph("skyward", cache_dir=None)
    assert graph.find_modules_that_directly_import("skyward") == set()


def _rank() -> dict[str, int]:
    """Each top-level package's layer, counted from the ground (0)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["id"] == "layers"]
    return {name.strip(): rank for rank, layer in enumerate(reversed(layers)) for name in layer.split("|")}


@needs_checkout
def test_the_lazy_name_maps_point_downward() -> None:
    """Modules imported by their names as strings (which import-linter cannot see) sit in
    the map's own package or below it."""
    from skyward import integrations, plugins
    from skyward.providers import names

    rank = _rank()
    maps = {
        "plugins": set(plugins._LAZY.values()),
        "integrations": set(integrations._LAZY.values()),
        "providers": {known.module for known in names.KNOWN.values()},
    }
    upward = {
        owner: sorted(module for module in modules if rank[module.split(".")[1]] > rank[owner])
        for owner, modules in maps.items()
    }
    assert {owner: found for owner, found in upward.items() if found} == {}
    assert all(module.startswith("skyward.") for modules in maps.values() for module in modules)


@needs_checkout
@pytest.mark.parametrize(
    "planted",
    [
        "def open_pool():\n    from skyward.api.pool import Pool\n\n    return Pool\n",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from skyward.api.pool import Pool\n",
    ],
    ids=["function-level", "type-checking"],
)
def test_an_upward_import_breaks_the_contract(tmp_path: Path, planted: str) -> None:
    shutil.copytree(PACKAGE, tmp_path / "skyward", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "skyward" / "core" / "planted.py").write_text(planted)
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "0 kept, 1 broken" in done.stdout
    assert "skyward.core.planted -> skyward.api.pool" in done.stdout
