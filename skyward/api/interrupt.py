"""SIGTERM (``kill PID``) shuts an open pool down as Ctrl-C does.

While at least one pool is open in the main thread, SIGTERM raises KeyboardInterrupt
there: the ``with`` block exits with it, the pool cancels its work and stops every
process it started, and the script ends as after Ctrl-C. The previous handler comes back
when the last such pool closes. A handler the program set itself is left alone, and so
is a pool opened in another thread (Python delivers signals to the main thread only).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

_lock = threading.Lock()
_holders = 0
_previous: Callable[[int, FrameType | None], object] | int | None = None
"""The SIGTERM handler ours replaced (restored by the last ``release``)."""


def hold() -> bool:
    """Install the handler (first holder); False if it could not be (not the main thread,
    or the program has its own SIGTERM handler). Pair a True with ``release``."""
    global _holders, _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        current = signal.getsignal(signal.SIGTERM)
        if _holders == 0 and current is not _interrupt:  # ours may be left from another thread's release
            if current not in (signal.SIG_DFL, None):
                return False
            _previous = current
            signal.signal(signal.SIGTERM, _interrupt)
        _holders += 1
        return True


def reassert() -> None:
    """Put the handler back in front of one installed since at the C level, while it is
    held (main thread only). Ray's core worker installs a failure-signal handler for
    SIGTERM in ``ray.init``: it prints a C++ stack and can abort the process before the
    pool has shut down, so the pool calls this once Ray is up."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        if _holders > 0 and signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, _interrupt)


def release() -> None:
    """One holder is done; the last one restores the previous handler (main thread only:
    elsewhere the handler stays until the next release there)."""
    global _holders
    with _lock:
        _holders = max(0, _holders - 1)
        if _holders == 0 and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}: shutting the pool down")
