"""The suite tells the truth about itself: every test function asserts something (itself,
or through a helper of the suite that does), and under ``CI=true`` a skip whose reason is
not on the short list in tests/conftest.py (``CI_SKIPS``) fails the run."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CHECKS = {"raises", "fail", "warns", "deprecated_call"}
"""Calls that assert: ``pytest.raises`` and its kin."""


def _asserts_directly(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call) and _called(node) in CHECKS:
            return True
    return False


def _called(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def not_asserting(root: Path = TESTS) -> list[str]:
    """The test functions (``tests/**/test_*.py``) with no assertion of their own and no
    call of a function of the suite that asserts, directly or through others (by name)."""
    functions: dict[str, list[tuple[bool, set[str]]]] = {}
    tests: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = {_called(call) for call in ast.walk(node) if isinstance(call, ast.Call)}
                functions.setdefault(node.name, []).append((_asserts_directly(node), calls))
                if node.name.startswith("test_") and path.name.startswith("test_"):
                    tests.append((str(path.relative_to(root.parent)), node.name))
    asserting = {name for name, bodies in functions.items() if any(direct for direct, _ in bodies)}
    grown = True
    while grown:
        grown = False
        for name, bodies in functions.items():
            if name not in asserting and any(calls & asserting for _, calls in bodies):
                asserting.add(name)
                grown = True
    return [f"{path}::{name}" for path, name in tests if name not in asserting]


def test_every_test_function_asserts_something() -> None:
    assert not_asserting() == []


def test_a_test_without_an_assertion_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "tests"
    planted.mkdir()
    (planted / "test_planted.py").write_text(
        "def test_nothing_checked():\n    sum([1, 2])\n\ndef test_checked_by_a_helper():\n    helper()\n\n"
        "def helper():\n    assert sum([1, 2]) == 3\n", encoding="utf-8",
    )
    assert not_asserting(planted) == ["tests/test_planted.py::test_nothing_checked"]


def _run_planted(tmp_path: Path, body: str, ci: bool) -> subprocess.CompletedProcess[str]:
    """``body`` as a test file run by pytest in ``tmp_path``, with the suite's skip hook
    (not inside tests/, where the suite's other runs would collect it)."""
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(TESTS / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "pytest_runtest_makereport = suite.pytest_runtest_makereport\n",
        encoding="utf-8",
    )
    (tmp_path / "test_planted.py").write_text(body, encoding="utf-8")
    env = {**os.environ, "CI": "true" if ci else "false"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_planted.py"], cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )


SKIPS = """
import pytest

def test_skipped_for_a_reason_of_its_own():
    pytest.skip("sshd is not installed")

def test_skipped_for_an_allowed_reason():
    pytest.skip("no NVIDIA GPU with NVML (nvidia-ml-py) on this machine")
"""


def test_under_ci_a_skip_not_on_the_list_fails_naming_its_reason(tmp_path: Path) -> None:
    done = _run_planted(tmp_path, SKIPS, ci=True)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed, 1 skipped" in done.stdout
    assert "skipped under CI=true: Skipped: sshd is not installed" in done.stdout


def test_outside_ci_both_skip_and_say_why(tmp_path: Path) -> None:
    done = _run_planted(tmp_path, SKIPS, ci=False)
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout[-2000:]
    assert "SKIPPED [1]" in done.stdout and "sshd is not installed" in done.stdout
