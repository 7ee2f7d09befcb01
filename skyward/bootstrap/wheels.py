"""The wheels a node installs from, built or fetched on the client and shipped over SSH,
so nodes run exactly the client's skyward and dependency versions and need no network.

- ``skyward_wheel``: a wheel built from the client's own skyward checkout (a copy of it,
  so the checkout is left untouched), cached under ``~/.skyward/wheels`` by a digest of
  its files.
- ``dependency_wheels``: skyward's dependencies pinned to the versions installed here,
  plus ``uv``, downloaded once with pip into a wheelhouse cached by its requirements.
"""

from __future__ import annotations

import email.parser
import hashlib
import importlib.metadata
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from skyward.bootstrap.versions import package_digest

CACHE = Path("~/.skyward/wheels").expanduser()
BUILD_TIMEOUT = 300.0
PACKAGE = Path(__file__).resolve().parent.parent


class WheelError(RuntimeError):
    """A wheel could not be built or downloaded."""


def source_checkout() -> Path | None:
    """The project directory skyward is installed from, when it is a checkout."""
    root = PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() else None


def skyward_wheel() -> Path:
    """A wheel of this very copy of skyward (built once per digest)."""
    root = source_checkout()
    if root is None:
        raise WheelError(
            f"skyward at {PACKAGE} is not a source checkout, so no wheel can be built from it; "
            'use Image(skyward_source="pypi") to install the released version on the nodes'
        )
    target = CACHE / f"skyward-{package_digest(PACKAGE)}"
    found = sorted(target.glob("skyward-*.whl")) if target.is_dir() else []
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(prefix="skyward-build-") as scratch:
        source = Path(scratch) / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (root / name).is_file():
                shutil.copy2(root / name, source / name)
        shutil.copytree(PACKAGE, source / "skyward", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out = Path(scratch) / "out"
        _pip("wheel", "--no-deps", "--wheel-dir", str(out), str(source))
        built = sorted(out.glob("skyward-*.whl"))
        if not built:
            raise WheelError(f"pip built no skyward wheel from {root}")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target / built[0].name)
    return target / built[0].name


def wheel_digest(wheel: Path) -> str:
    """The package digest a wheel from ``skyward_wheel`` was built with."""
    return wheel.parent.name.removeprefix("skyward-")


def dependency_requirements(wheel: Path) -> list[str]:
    """The runtime requirements in ``wheel``'s metadata, pinned to this environment's
    versions where installed here, plus uv."""
    pins = []
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    for text in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        pins.append(pinned(requirement.name))
    return sorted(pins) + [pinned("uv")]


def pinned(name: str) -> str:
    """``name==<installed version>``, or just ``name`` when it is not installed here."""
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


def dependency_wheels(requirements: list[str]) -> Path:
    """A directory of wheels for ``requirements`` and what they need (downloaded once)."""
    key = hashlib.sha256("\n".join([platform_tag(), *requirements]).encode()).hexdigest()[:16]
    target = CACHE / f"deps-{key}"
    if (target / ".complete").is_file():
        return target
    partial = Path(tempfile.mkdtemp(prefix="deps-", dir=_ensure(CACHE)))
    try:
        _pip("download", "--only-binary=:all:", "--dest", str(partial), *requirements)
        (partial / ".complete").write_text("\n".join(requirements))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def platform_tag() -> str:
    """What the shipped wheels are built for: this machine's OS, CPU and Python."""
    return f"{sys.platform}-{platform.machine()}-py{sys.version_info.major}.{sys.version_info.minor}"


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise WheelError(f"`pip {args[0]}` did not finish within {BUILD_TIMEOUT:g}s") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-3000:]
        raise WheelError(f"`pip {' '.join(args)}` failed (exit {result.returncode}):\n{output}")
