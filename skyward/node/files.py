"""What ``sky cp`` and ``sky ssh`` run on a node: the files under a path, a chunk of one
read or written at an offset, and the node's working directory and environment. A
relative path is the node's working directory's (where its tasks run). Errors are the
operating system's, naming the path."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

CHUNK = 8 * 1024 * 1024
"""Bytes one task carries each way: a file of any size crosses in tasks of this size."""


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
        return Found(absolute, "file", (Entry("", info.st_size, stat.S_IMODE(info.st_mode)),))
    if not os.path.isdir(absolute):
        return Found(absolute, "missing")
    entries = []
    for directory, _, names in os.walk(absolute, followlinks=False):
        for name in sorted(names):
            full = os.path.join(directory, name)
            if os.path.isfile(full):
                info = os.stat(full)
                entries.append(Entry(os.path.relpath(full, absolute), info.st_size, stat.S_IMODE(info.st_mode)))
    return Found(absolute, "directory", tuple(sorted(entries, key=lambda entry: entry.relative)))


def read_chunk(path: str, offset: int, size: int = CHUNK) -> bytes:
    """Up to ``size`` bytes of the file at ``path`` from ``offset``."""
    with open(os.path.expanduser(path), "rb") as handle:
        handle.seek(offset)
        return handle.read(size)


def write_chunk(path: str, offset: int, data: bytes, mode: int) -> None:
    """Write ``data`` at ``offset`` of the file at ``path``: at offset 0 the file is
    created (its missing parent directories too) or emptied first, with ``mode``."""
    target = os.path.expanduser(path)
    if offset == 0:
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        os.fchmod(descriptor, mode)
    else:
        descriptor = os.open(target, os.O_WRONLY)
    with os.fdopen(descriptor, "wb") as handle:
        handle.seek(offset)
        handle.write(data)


def workplace() -> tuple[str, dict[str, str]]:
    """The node's working directory and its tasks' environment."""
    return os.getcwd(), dict(os.environ)
