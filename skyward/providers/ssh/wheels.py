"""The wheels a node installs from, made or fetched on the client and shipped over SSH,
so nodes run exactly the client's skyward and dependency versions and need no route to
a package index.

- ``skyward_wheel``: a wheel of the very skyward package this client imported, written
  directly from its files, whether it is a source checkout or an installed wheel
  (editable or not); cached under ``~/.skyward/wheels`` (``$SKYWARD_HOME``) by a digest of its files. The
  node installs it by path, never from an index.
- ``resolve``: wheels for a list of requirements and everything they need, for a node's
  platform (the client's own, or another OS/CPU), downloaded once with pip into a
  wheelhouse cached by what was asked.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from skyward.core.paths import skyward_dir
from skyward.providers.ssh.versions import package_digest

RESOLVE_TIMEOUT = 600.0
PACKAGE = Path(__file__).resolve().parents[2]
"""The skyward package directory this client runs."""


class WheelError(RuntimeError):
    """A wheel could not be made or downloaded; the message has pip's output."""


@dataclass(frozen=True, slots=True)
class NodePlatform:
    """What a node runs wheels on: OS, CPU (``uname -m``), Python minor, glibc."""

    system: str
    machine: str
    python: str
    glibc: str = ""

    @classmethod
    def here(cls) -> NodePlatform:
        libc, version = platform.libc_ver()
        return cls(
            sys.platform, platform.machine(), f"{sys.version_info.major}.{sys.version_info.minor}",
            version if libc == "glibc" else "",
        )

    @property
    def tag(self) -> str:
        return f"{self.system}-{self.machine}-py{self.python}"

    def pip_options(self) -> list[str]:
        """pip's ``--platform``/``--python-version`` options for this platform (none for
        the client's own: pip then takes its exact tags)."""
        if self.tag == NodePlatform.here().tag:
            return []
        major, minor = self.python.split(".")
        options = ["--python-version", self.python, "--implementation", "cp", "--abi", f"cp{major}{minor}"]
        if self.system == "linux":
            tags = [f"manylinux2014_{self.machine}", f"manylinux_2_17_{self.machine}"]
            if self.glibc:
                tags.append(f"manylinux_{self.glibc.replace('.', '_')}_{self.machine}")
            tags.append(f"linux_{self.machine}")
        else:
            tags = [f"{self.system}_{self.machine}"]
        for tag in tags:
            options += ["--platform", tag]
        return options


def skyward_wheel() -> Path:
    """A wheel of this very copy of skyward (written once per digest of its files)."""
    digest = package_digest(PACKAGE)
    target = skyward_dir("wheels") / f"skyward-{digest}"
    found = sorted(target.glob("skyward-*.whl")) if target.is_dir() else []
    if found:
        return found[0]
    metadata = _metadata()
    version = email.parser.Parser().parsestr(metadata)["Version"]
    name = f"skyward-{version}-py3-none-any.whl"
    target.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkstemp(prefix=".skyward-", suffix=".part", dir=target)[1])
    try:
        _write_wheel(partial, version, metadata)
        partial.replace(target / name)
    finally:
        partial.unlink(missing_ok=True)
    return target / name


def wheel_digest(wheel: Path) -> str:
    """The package digest a wheel from ``skyward_wheel`` was made from."""
    return wheel.parent.name.removeprefix("skyward-")


def _metadata() -> str:
    """skyward's core metadata: that of the installed distribution whose files these are,
    else (a checkout, installed editable or not at all) from its pyproject.toml."""
    try:
        distribution = importlib.metadata.distribution("skyward")
        text = distribution.read_text("METADATA")
        if text and Path(str(distribution.locate_file("skyward"))).resolve() == PACKAGE:
            return text
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = PACKAGE.parent / "pyproject.toml"
    if not pyproject.is_file():
        raise WheelError(f"skyward at {PACKAGE} has no package metadata (neither installed nor a checkout)")
    project = tomllib.loads(pyproject.read_text())["project"]
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    lines += [f"Requires-Dist: {dependency}" for dependency in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _write_wheel(path: Path, version: str, metadata: str) -> None:
    info = f"skyward-{version}.dist-info"
    files: list[tuple[str, bytes]] = []
    for source in sorted(PACKAGE.rglob("*")):
        relative = source.relative_to(PACKAGE.parent).as_posix()
        if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc":
            files.append((relative, source.read_bytes()))
    files.append((f"{info}/METADATA", metadata.encode()))
    files.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: skyward\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, data, zipfile.ZIP_DEFLATED)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


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


def resolve(
    requirements: list[str], target: NodePlatform, index: str | None = None, extra_indexes: tuple[str, ...] = ()
) -> Path:
    """A directory of wheels for ``requirements`` and what they need, for ``target``
    (downloaded once; ``index`` replaces pip's default index, ``extra_indexes`` are
    searched too). On the client's own platform a package with no wheel is built from
    its sdist; elsewhere only wheels can be used. WheelError with pip's output when pip
    cannot do it."""
    asked = [target.tag, target.glibc, index or "", *extra_indexes, *requirements]
    key = hashlib.sha256("\n".join(asked).encode()).hexdigest()[:16]
    wheelhouse = skyward_dir("wheels") / f"deps-{key}"
    if (wheelhouse / ".complete").is_file():
        return wheelhouse
    partial = Path(tempfile.mkdtemp(prefix="deps-", dir=skyward_dir("wheels")))
    try:
        where = (["--index-url", index] if index else []) + [
            option for url in extra_indexes for option in ("--extra-index-url", url)
        ]
        if target.pip_options():
            _pip("download", "--only-binary=:all:", *target.pip_options(), *where, "--dest", str(partial), *requirements)
        else:
            _pip("wheel", *where, "--wheel-dir", str(partial), *requirements)
        (partial / ".complete").write_text("\n".join(requirements))
        shutil.rmtree(wheelhouse, ignore_errors=True)
        partial.rename(wheelhouse)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return wheelhouse


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        raise WheelError(f"`pip {args[0]}` did not finish within {RESOLVE_TIMEOUT:g}s") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-3000:]
        raise WheelError(f"`pip {' '.join(args)}` failed on the client (exit {result.returncode}):\n{output}")
