"""What ``sky cp`` and ``sky ssh`` run on a node: the files under a path, a chunk of one
read or written at an offset, and the node's working directory and environment. A
relative path is the node's working directory's (where its tasks run). Errors are the
operating system's, naming the path."""

from __future__ import annotations

import os
from dataclasses import dataclass

from skyward.core.instance import instance_info

CHUNK = 8 * 1024 * 1024
"""Bytes one task carries each way: a file of any size crosses in tasks of this size."""
PART = ".sky-part"
"""The suffix of a file being written, beside where it goes, until its last chunk."""
PERMISSIONS = 0o777
"""The mode bits a copy keeps (as ``cp -r``: not setuid, setgid or sticky)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A regular file under the path copied: ``relative`` to it ("" when the path is the
    file itself), its size in bytes and its permission bits."""

    relative: str
    size: int
    mode: int


@dataclass(frozen=True, slots=True)
class Found:
    """What is at a path on a node: ``kind`` is "file", "directory" or "missing"; its
    regular files (symbolic links followed, other kinds left out) when it exists."""

    path: str
    kind: str
    entries: tuple[Entry, ...] = ()


def found(path: str) -> Found:
    """What is at ``path`` (expanded: ``~`` is the node user's home)."""
    absolute = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(absolute):
        info = os.stat(absolute)
        return Found(absolute, "file", (Entry("", info.st_size, info.st_mode & PERMISSIONS),))
    if not os.path.isdir(absolute):
        return Found(absolute, "missing")
    entries = []
    for directory, _, names in os.walk(absolute, followlinks=False):
        for name in sorted(names):
            full = os.path.join(directory, name)
            if os.path.isfile(full):
                info = os.stat(full)
                entries.append(Entry(os.path.relpath(full, absolute), info.st_size, info.st_mode & PERMISSIONS))
    return Found(absolute, "directory", tuple(sorted(entries, key=lambda entry: entry.relative)))


def read_chunk(path: str, offset: int, size: int = CHUNK) -> bytes:
    """Up to ``size`` bytes of the file at ``path`` from ``offset``."""
    with open(os.path.expanduser(path), "rb") as handle:
        handle.seek(offset)
        return handle.read(size)


def kind(path: str) -> tuple[str, str]:
    """The absolute form of ``path`` and what is there: "file", "directory" or "missing"
    (nothing under a directory is read)."""
    absolute = os.path.abspath(os.path.expanduser(path))
    return absolute, "directory" if os.path.isdir(absolute) else "file" if os.path.isfile(absolute) else "missing"


def write_chunk(path: str, offset: int, data: bytes, mode: int, last: bool) -> None:
    """Write ``data`` at ``offset`` of the file being copied to ``path``. The bytes go to
    a private file beside it (``PART`` and the node's number; at offset 0 made, with
    missing parent directories, or emptied); with ``last`` it takes ``mode``'s permission bits and
    replaces ``path``. A read-only mode is set last, so every chunk can be written."""
    target = os.path.abspath(os.path.expanduser(path))
    info = instance_info()
    partial = f"{target}{PART}-{info.node if info is not None else 0}"  # nodes sharing a filesystem write apart
    if offset == 0:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    else:
        descriptor = os.open(partial, os.O_WRONLY)
    with os.fdopen(descriptor, "wb") as handle:
        handle.seek(offset)
        handle.write(data)
    if last:
        os.chmod(partial, mode & PERMISSIONS)
        os.replace(partial, target)


def workplace() -> tuple[str, dict[str, str]]:
    """The node's working directory and its tasks' environment."""
    return os.getcwd(), dict(os.environ)
