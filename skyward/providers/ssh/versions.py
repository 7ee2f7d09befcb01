"""What client and nodes must agree on: Python minor version, cloudpickle, skyward (its
version and a digest of its source files). A node's bootstrap script loads this file by
its path and calls ``report`` (it imports nothing of skyward, so it is quick)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path


def package_digest(root: Path) -> str:
    """A digest of a package's ``.py`` files: equal on client and node for the same copy."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def report() -> dict[str, str]:
    """This interpreter's versions of what must match."""
    spec = importlib.util.find_spec("skyward")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "cloudpickle": _version("cloudpickle"),
        "skyward": _version("skyward"),
        "skyward_digest": package_digest(Path(locations[0])) if locations else "",
    }


def mismatches(client: dict[str, str], node: dict[str, str]) -> list[str]:
    """Human-readable differences that make a node unusable for this client."""
    keys = ["python", "cloudpickle", "skyward", "skyward_digest"]
    return [f"{key}: client {client.get(key)!r}, node {node.get(key)!r}" for key in keys if client.get(key) != node.get(key)]


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
