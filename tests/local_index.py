"""A package index on disk for the SSH test hosts, which have no network route out.

It holds one tiny pure-Python wheel, ``skyward-demo`` (module ``skyward_demo``), built
here by hand, in the PEP 503 "simple" layout that ``uv --index file://...`` reads. It
lives under /var/tmp because the hosts get private /tmp directories.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def local_index() -> Iterator[str]:
    """Yield the ``file://`` URL of a simple index holding ``skyward-demo``; removed after."""
    root = tempfile.mkdtemp(prefix="skyward-index-", dir="/var/tmp")
    try:
        project = os.path.join(root, "simple", PACKAGE)
        os.makedirs(project)
        wheel = _write_wheel(project)
        with open(os.path.join(project, "index.html"), "w") as page:
            page.write(f'<!DOCTYPE html><html><body><a href="{wheel}">{wheel}</a></body></html>\n')
        with open(os.path.join(root, "simple", "index.html"), "w") as page:
            page.write(f'<!DOCTYPE html><html><body><a href="{PACKAGE}/">{PACKAGE}</a></body></html>\n')
        yield f"file://{root}/simple"
    finally:
        shutil.rmtree(root, ignore_errors=True)
