"""The loop where a process's collection cache and lease keeper talk to the host actors
in the background: ``core.loop_thread.LoopThread``, stopped with what runs on it cancelled."""

from __future__ import annotations

from skyward.core.loop_thread import LoopThread


class BackgroundLoop(LoopThread):
    """Started on first use; ``stop`` cancels what runs on it, then ends the thread."""

    def stop(self, cancel: bool = True) -> None:
        super().stop(cancel)
