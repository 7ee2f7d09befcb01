"""A Unix stream socket listening at a path, only for this user: every socket skyward
serves on a path (the pool daemon's and each kept pool's, a node's lanes, a rejoinable
pool's) is made here, so none is ever found at its path before it is private."""

from __future__ import annotations

import contextlib
import os
import socket

MAX_PATH = 99
"""The longest path ``listening_at`` can serve at: an ``AF_UNIX`` path holds 107 bytes,
and the socket is bound first under a name 8 bytes longer (``staging``)."""


def socket_path(directory: str | None, name: str) -> str:
    """``directory/name``, or "" when there is no directory or the path is longer than
    ``MAX_PATH`` (a caller then goes without that socket)."""
    if not directory:
        return ""
    path = os.path.join(directory, name)
    return path if len(path) <= MAX_PATH else ""


def listening_at(path: str, backlog: int = 16) -> socket.socket:
    """A socket listening at ``path``, mode 0600, in place of what is there (a dead
    predecessor's socket). Bound, narrowed and listening under a name of this process's
    first (``staging``), then renamed to ``path``: a peer never connects at ``path`` to a
    socket that is not yet private, nor finds one that is not yet listening. Raises
    ``OSError`` when it cannot be made; then nothing of it is left."""
    staging_path = staging(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging_path)
        server.bind(staging_path)
        os.chmod(staging_path, 0o600)
        server.listen(backlog)
        os.replace(staging_path, path)
    except BaseException:
        server.close()
        with contextlib.suppress(OSError):
            os.unlink(staging_path)
        raise
    return server


def staging(path: str) -> str:
    """Where this process binds the socket it will serve at ``path``."""
    return f"{path}.{os.getpid()}"
