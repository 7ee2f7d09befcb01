"""Start a client subprocess as a shell in a terminal would: SIGINT unblocked and at its
default. A process inherits the blocked and ignored signals of the thread that started
it, and this test process (a Ray driver, with threads of asyncssh, moto and the pools)
may have SIGINT blocked where a user's shell never does; a client started from it would
then never see the Ctrl-C a test sends."""

from __future__ import annotations

import signal


def like_a_terminal() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: runs in the child before it executes."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
