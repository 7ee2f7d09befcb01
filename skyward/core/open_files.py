"""The limit on a process's open files, raised where one process holds a socket per node.

A pool's head relay keeps a lane (a TCP connection) to every node's agent beside Ray's
own sockets, so a pool of a thousand nodes needs more descriptors than the soft limit of
1,024 that a login or SSH session usually starts with; the hard limit (often 524,288 or
more) lets a process raise its own soft limit without privileges. ``raise_open_files``
does that once at start, so a big pool fails on nothing but the machine's real limit.
"""

from __future__ import annotations

import resource

WANTED = 65_536
"""Open files a process that serves every node asks for: lanes and Ray's sockets for
tens of thousands of nodes."""


def raise_open_files(wanted: int = WANTED) -> int:
    """Raise this process's soft limit on open files to ``wanted`` (to the hard limit where
    that is lower; never lowered); the soft limit now. A refusal leaves it as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target
