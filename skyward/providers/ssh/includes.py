"""``Image.includes`` -> one .tar.gz the nodes unpack onto their import path.

A directory ships under its own name (``includes=["./src"]`` makes ``import src`` work,
as on a local pool), a ``.py`` file as itself; ``excludes`` are glob patterns matched
against each file's path inside the archive and its name. Caches and VCS dirs never ship.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import tarfile

from skyward.core.validation import fail
from skyward.image.image import Image

ALWAYS_EXCLUDED = ("__pycache__", "*.pyc", ".git", ".venv", ".mypy_cache", ".pytest_cache")


def archive(image: Image) -> tuple[bytes, str] | None:
    """The includes as gzipped tar bytes and their content digest; None when there are none."""
    if not image.includes:
        return None
    files: list[tuple[str, str]] = []
    for include in image.includes:
        path = os.path.abspath(os.path.expanduser(include))
        if os.path.isfile(path):
            files.append((path, os.path.basename(path)))
        elif os.path.isdir(path):
            files.extend(_walk(path, image.excludes))
        else:
            raise fail("Image", "includes", include, "the path does not exist on this machine")
    files.sort(key=lambda item: item[1])
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for source, name in files:
            with open(source, "rb") as f:
                data = f.read()
            digest.update(name.encode() + b"\0" + data + b"\0")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue(), digest.hexdigest()[:16]


def _walk(root: str, excludes: tuple[str, ...]) -> list[tuple[str, str]]:
    base = os.path.dirname(root)
    found = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _excluded(d, os.path.relpath(os.path.join(directory, d), base), excludes))
        for name in names:
            source = os.path.join(directory, name)
            relative = os.path.relpath(source, base)
            if not _excluded(name, relative, excludes):
                found.append((source, relative))
    return found


def _excluded(name: str, relative: str, excludes: tuple[str, ...]) -> bool:
    patterns = (*ALWAYS_EXCLUDED, *excludes)
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)
