"""Where skyward keeps its files on the client: ``$SKYWARD_HOME``, else ``~/.skyward``
(wheels it ships, known host keys, cached cloud catalogs and prices, per-pool keys, the
registry of live pools)."""

from __future__ import annotations

import os
from pathlib import Path


def skyward_home() -> Path:
    """The directory (created on first use, private to the user)."""
    home = Path(os.environ.get("SKYWARD_HOME") or Path.home() / ".skyward").expanduser()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def skyward_dir(name: str) -> Path:
    """A private subdirectory of ``skyward_home()``."""
    path = skyward_home() / name
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
