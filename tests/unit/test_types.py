"""The type checker passes on skyward/ (configured in pyproject.toml: all of it, the
ground package skyward/core and the engine skyward/engine with --strict's checks), and a
planted type error fails it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ROOT / "skyward"

pytestmark = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").is_file() or not CHECKED.is_dir(),
    reason="needs the source checkout (the tests run here from an installed copy)",
)


def _mypy(root: Path, cache: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache), *paths],
        cwd=root, capture_output=True, text=True, timeout=600, check=False,
    )


def test_mypy_passes_on_skyward(tmp_path: Path) -> None:
    done = _mypy(ROOT, tmp_path / "cache")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.parametrize("package", ["core", "engine"])
def test_a_planted_type_error_in_a_strict_package_fails_it(tmp_path: Path, package: str) -> None:
    planted = tmp_path / "skyward" / package
    planted.mkdir(parents=True)
    (tmp_path / "skyward" / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "planted.py").write_text("def untyped(value):\n    return value\n")  # --strict: no annotations
    done = _mypy(tmp_path, tmp_path / "cache", f"skyward/{package}/planted.py")
    assert done.returncode == 1, done.stdout
    assert "planted.py:1: error: Function is missing a type annotation" in done.stdout
