"""Directories and files only this user controls: where skyward keeps what another user
of the machine must not read, replace or plant (its home, logs, keys, MPS pipes, a
stream's stop requests)."""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
import tempfile


def private_directory(path: str) -> None:
    """Make ``path`` a directory only this user controls, mode 0700: created so, or an
    existing one of this user's that group and others cannot write, narrowed to 0700.

    Raises PermissionError naming the path, its owner and mode, and the fix, when it is
    a symlink or not a directory, belongs to another user, or is group/other writable:
    whoever controls it could take the place of what this user keeps there."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    state = os.lstat(path)
    problem = _not_private(state)
    if problem is not None:
        raise PermissionError(
            f"{path} {problem} (owner {_user(state.st_uid)}, mode "
            f"{stat.filemode(state.st_mode)} {stat.S_IMODE(state.st_mode):04o}), so another "
            f"user could control it; remove it (`rm -rf {path}`, as its owner or root) and "
            "open the pool again"
        )
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(descriptor, 0o700)
    finally:
        os.close(descriptor)


def private_directories(path: str) -> None:
    """``private_directory(path)``, its missing parents made first (mode 0700; parents
    that exist are left as they are)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    private_directory(path)


def create_private_file(path: str, data: bytes) -> None:
    """Write ``data`` to a new file at ``path``, mode 0600 from its creation (``O_EXCL``:
    never a file or link that was there before). FileExistsError when ``path`` exists."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def replace_private(path: str, text: str) -> None:
    """Put ``text`` at ``path`` in one step (a reader sees the old file or the new one,
    never a part), mode 0600: written to a file of its own name beside it first
    (``mkstemp``), then renamed over it; that file is gone if anything fails."""
    descriptor, partial = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise


def open_private(path: str, flags: int) -> int:
    """A descriptor of the file at ``path`` (created when missing with ``O_CREAT`` in
    ``flags``), mode 0600: created so, or an existing one narrowed. Never follows a link."""
    descriptor = os.open(path, flags | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def is_private(path: str) -> bool:
    """True when ``path`` is a directory (not a symlink) of this user that group and
    others cannot write."""
    try:
        return _not_private(os.lstat(path)) is None
    except OSError:
        return False


def _not_private(state: os.stat_result) -> str | None:
    """Why a directory with this ``lstat`` is not this user's alone, or None."""
    if stat.S_ISLNK(state.st_mode):
        return "is a symlink, not a directory"
    if not stat.S_ISDIR(state.st_mode):
        return "is not a directory"
    if state.st_uid != os.geteuid():
        return f"belongs to another user, not to {_user(os.geteuid())}"
    if state.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "is writable by its group or others"
    return None


def _user(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` for a uid without a name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"
