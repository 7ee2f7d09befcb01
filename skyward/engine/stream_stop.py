"""Asking a streaming generator on a node to stop (its client closed the stream).

The client's request runs on the node beside its tasks (a probe: no slot is taken) and
leaves a marker file named after the stream in the node's temp folder, which the agent
and its executor processes share, in a directory only this user controls (one another
user made first is refused, so no one else can plant a request); the generator looks for
it before each value, and removes it when it ends. A request that reaches a node after its generator ended leaves
an empty file behind, so the client asks only the node that runs the stream, once a
value told it which (see engine/value_stream.py), and only while the call is running.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from skyward.core.private_dir import is_private, private_directory


def marker(stream: str) -> Path:
    """Where the stop request of ``stream`` is left; ValueError for an id that is not
    a plain name (stream ids are hex strings)."""
    if not stream.isalnum():
        raise ValueError(f"stream id {stream!r} is not valid: expected letters and digits only")
    return Path(tempfile.gettempdir()) / f"skyward-streams-{os.getuid()}" / stream


def request_stop(stream: str) -> None:
    """Ask the generator of ``stream`` running on this node to stop before its next value."""
    path = marker(stream)
    private_directory(str(path.parent))
    path.touch()


def requested(path: Path) -> bool:
    """True when a stop request is at ``path`` and its directory is this user's alone."""
    return path.exists() and is_private(str(path.parent))


def forget(path: Path) -> None:
    """Remove a stop request (the generator ended)."""
    path.unlink(missing_ok=True)
