"""Where skyward keeps its files on the client: ``$SKYWARD_HOME``, else ``~/.skyward``
(wheels it ships, known host keys, cached cloud catalogs and prices, per-pool keys, the
registry of live pools, logs). Every directory of it is private to the user
(``private_dir.private_directory``: created 0700, an existing one of the user's narrowed,
another user's refused)."""

from __future__ import annotations

import os
from pathlib import Path

from skyward.core.private_dir import private_directories, private_directory

DEFAULT_HOME = "~/.skyward"
"""The home when ``SKYWARD_HOME`` is not set; a path that starts with it (a default log
file) lies in ``skyward_home()`` instead (``in_home``)."""


def skyward_home() -> Path:
    """The directory (created on first use, private to the user). PermissionError naming
    it and the fix when another user controls it."""
    home = Path(os.environ.get("SKYWARD_HOME") or DEFAULT_HOME).expanduser()
    private_directories(str(home))
    return home


def skyward_dir(name: str) -> Path:
    """A private subdirectory of ``skyward_home()``."""
    path = skyward_home() / name
    private_directory(str(path))
    return path


def in_home(path: str) -> Path:
    """``path`` with a leading ``~/.skyward`` replaced by ``skyward_home()`` (so a default
    path follows ``SKYWARD_HOME``), and ``~`` expanded."""
    head = DEFAULT_HOME + "/"
    if path.startswith(head):
        return Path(os.environ.get("SKYWARD_HOME") or DEFAULT_HOME).expanduser() / path[len(head):]
    return Path(path).expanduser()
