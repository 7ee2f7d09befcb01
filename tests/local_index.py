"""Package indexes on disk for the SSH test hosts, which have no network route out.

``local_index`` holds one tiny pure-Python wheel, ``skyward-demo`` (module
``skyward_demo``), built here by hand; ``wheel_index`` holds real projects (torch,
scikit-learn, ...) and everything they need, at the versions installed here. Both are in
the PEP 503 "simple" layout that ``uv --index file://...`` reads, under /var/tmp because
the hosts get private /tmp directories.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

PACKAGE = "skyward-demo"
MODULE = "skyward_demo"
VERSION = "1.0"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(directory: str) -> str:
    name = f"{MODULE}-{VERSION}-py3-none-any.whl"
    info = f"{MODULE}-{VERSION}.dist-info"
    files = {
        f"{MODULE}/__init__.py": f'VERSION = "{VERSION}"\n'.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: skyward-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "\n".join([*(_record_line(p, d) for p, d in files.items()), f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
        wheel.writestr(f"{info}/RECORD", record)
    return name


def _write_pages(simple: str) -> None:
    """The index pages of ``simple``, whose project directories hold their wheels."""
    projects = sorted(p for p in os.listdir(simple) if os.path.isdir(os.path.join(simple, p)))
    for project in projects:
        wheels = sorted(n for n in os.listdir(os.path.join(simple, project)) if n.endswith(".whl"))
        links = "".join(f'<a href="{w}">{w}</a>\n' for w in wheels)
        with open(os.path.join(simple, project, "index.html"), "w") as page:
            page.write(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    links = "".join(f'<a href="{p}/">{p}</a>\n' for p in projects)
    with open(os.path.join(simple, "index.html"), "w") as page:
        page.write(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")


@contextmanager
def local_index() -> Iterator[str]:
    """Yield the ``file://`` URL of a simple index holding ``skyward-demo``; removed after."""
    root = tempfile.mkdtemp(prefix="skyward-index-", dir="/var/tmp")
    try:
        project = os.path.join(root, "simple", PACKAGE)
        os.makedirs(project)
        _write_wheel(project)
        _write_pages(os.path.join(root, "simple"))
        yield f"file://{root}/simple"
    finally:
        shutil.rmtree(root, ignore_errors=True)


WHEEL_SOURCES = ("/opt/wheels",)
"""Directories of wheels pip looks in besides its configured indexes, when they exist
(this machine's torch CPU build is one)."""
DOWNLOAD_TIMEOUT = 600


def installed_closure(names: Sequence[str]) -> dict[str, str]:
    """``names`` and every distribution they need here (markers evaluated for this
    interpreter, no extras), each with its installed version: canonical name -> version.
    PackageNotFoundError when one is not installed."""
    found: dict[str, str] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        distribution = importlib.metadata.distribution(name)
        found[name] = distribution.version
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return dict(sorted(found.items()))


@contextmanager
def wheel_index(names: Sequence[str]) -> Iterator[str]:
    """Yield the ``file://`` URL of a simple index holding the wheels of ``names`` and of
    everything they need, at exactly the versions installed here; removed after.

    The wheels come from ``pip download --no-deps`` of those pins: from pip's cache or its
    configured indexes (CI has the registries; the test hosts reach none), and from
    ``WHEEL_SOURCES``. RuntimeError with pip's output when one cannot be had."""
    pins = [f"{name}=={version}" for name, version in installed_closure(names).items()]
    root = tempfile.mkdtemp(prefix="skyward-wheels-", dir="/var/tmp")
    try:
        files = os.path.join(root, "files")
        sources = [option for path in WHEEL_SOURCES if os.path.isdir(path) for option in ("--find-links", path)]
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", *sources, "--dest", files, *pins,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
        if result.returncode != 0:
            raise RuntimeError(f"pip download of {pins} failed:\n{(result.stdout + result.stderr)[-3000:]}")
        simple = os.path.join(root, "simple")
        for wheel in os.listdir(files):
            project = os.path.join(simple, parse_wheel_filename(wheel)[0])
            os.makedirs(project, exist_ok=True)
            os.rename(os.path.join(files, wheel), os.path.join(project, wheel))
        missing = {canonicalize_name(pin.split("==")[0]) for pin in pins} - set(os.listdir(simple))
        if missing:
            raise RuntimeError(f"pip download of {pins} brought no wheel of {sorted(missing)}")
        _write_pages(simple)
        yield f"file://{simple}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
