"""Where skyward keeps its files on the client: ``$SKYWARD_HOME``, else ``~/.skyward``
(wheels it ships, known host keys, cached cloud catalogs and prices, per-pool keys, the
registry of live pools, logs). Every directory of it is private to the user
(``private_dir.private_directory``: created 0700, an existing one of the user's narrowed,
another user's refused)."""

from __future__ import annotations

import hashlib
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
    if not _own_link(home):
        private_directories(str(home))
    return home


def skyward_dir(name: str) -> Path:
    """A private subdirectory of ``skyward_home()`` (or the user's own link to one: a
    cache moved to a bigger disk)."""
    path = skyward_home() / name
    if not _own_link(path):
        private_directory(str(path))
    return path


def _own_link(path: Path) -> bool:
    """Whether ``path`` is a symbolic link of this user's; its target is then made or
    checked private (``private_directory``): the user chose to keep it there."""
    try:
        if not path.is_symlink() or os.lstat(path).st_uid != os.geteuid():
            return False
    except OSError:
        return False
    private_directory(os.path.realpath(path))
    return True


def in_home(path: str) -> Path:
    """``path`` with a leading ``~/.skyward`` replaced by ``skyward_home()`` (so a default
    path follows ``SKYWARD_HOME``), and ``~`` expanded."""
    head = DEFAULT_HOME + "/"
    if path.startswith(head):
        return Path(os.environ.get("SKYWARD_HOME") or DEFAULT_HOME).expanduser() / path[len(head):]
    return Path(path).expanduser()


RUNTIME_ROOT = "/tmp"
"""Where ``runtime_dir`` makes its per-user directory (not ``$TMPDIR``, which may be as
long as a home: the point is a short path)."""


def runtime_dir(owner: Path) -> Path:
    """A short directory, private to the user, for the Unix sockets of what keeps its
    files in ``owner`` (a directory of skyward's home): ``/tmp/skyward-<uid>/<12 hex of
    owner's path>``. A socket's path there has about 50 bytes whatever the length of
    ``HOME`` or ``SKYWARD_HOME`` (a Unix socket's path is limited to 107), as tmux and Ray
    keep theirs. Both levels are private (``private_directory``: another user's refused,
    naming the fix)."""
    path = runtime_path(owner)
    private_directory(str(path.parent))
    private_directory(str(path))
    return path


def runtime_path(owner: Path) -> Path:
    """Where ``runtime_dir(owner)`` is, without making it."""
    base = os.path.join(RUNTIME_ROOT, f"skyward-{os.geteuid()}")
    return Path(base) / hashlib.sha256(str(owner.resolve()).encode()).hexdigest()[:12]
