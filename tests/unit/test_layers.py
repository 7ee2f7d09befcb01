"""The ground package imports nothing above it: every ``skyward`` import in
skyward/core/ names skyward.core (the layer order is in docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import skyward

CORE = Path(skyward.__file__).parent / "core"


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
