"""The version skyward reads without ``importlib.metadata`` (``core.version``) is the one
it is installed as."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import skyward
from skyward.core.version import VERSION

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_is_pyprojects_and_the_installed_ones() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert VERSION == declared == importlib.metadata.version("skyward") == skyward.__version__
