"""Scripts run on kept pools for the pool daemon's HTTP API (``daemon.http_api``): ``python
script args`` as a subprocess of the daemon, in the script's directory, with
``$SKYWARD_POOL`` naming the kept pool (so every ``sky.Compute(...)`` of the script
adopts it, as under ``sky run NAME``). Its stdout and stderr lines are kept in memory
(up to ``MAX_LINES``) for readers that follow them; what is still running when the
daemon stops is terminated with it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ADOPT_ENV = "SKYWARD_POOL"
"""``skyward.api.compute.ADOPT_ENV`` (this layer cannot import it; a test checks they agree)."""
MAX_LINES = 100_000
"""Lines of output kept per run; later ones are counted and dropped."""
STOP_TIMEOUT = 10.0
"""Seconds a script has to exit after SIGTERM before it is killed."""


@dataclass(eq=False)
class Run:
    """One script run: its process and the lines it printed (stdout and stderr merged)."""

    id: str
    pool: str
    script: str
    args: tuple[str, ...]
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.time)
    ended: float | None = None
    exit_code: int | None = None
    lines: list[str] = field(default_factory=list)
    dropped: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)

    def describe(self) -> dict[str, object]:
        """What ``GET /runs/{id}`` answers."""
        with self.changed:
            return {
                "id": self.id, "pool": self.pool, "script": self.script, "args": list(self.args),
                "pid": self.process.pid, "state": "running" if self.exit_code is None else "exited",
                "exit_code": self.exit_code, "started": self.started, "ended": self.ended, "lines": len(self.lines),
            }

    def output(self, start: int, timeout: float) -> tuple[list[str], int | None]:
        """The lines from index ``start`` on, waiting up to ``timeout`` seconds for one
        when there is none yet; and the exit code once the run ended and every line was read."""
        with self.changed:
            if start >= len(self.lines) and self.exit_code is None:
                self.changed.wait(timeout)
            return self.lines[start:], self.exit_code

    def _follow(self) -> None:
        """Read the process's output until it exits (the run's reader thread)."""
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            with self.changed:
                if len(self.lines) < MAX_LINES:
                    self.lines.append(line)
                else:
                    self.dropped += 1
                self.changed.notify_all()
        code = self.process.wait()
        with self.changed:
            if self.dropped:
                self.lines.append(f"[skyward: {self.dropped} more lines of output were dropped (MAX_LINES {MAX_LINES})]")
            self.exit_code, self.ended = code, time.time()
            self.changed.notify_all()


class Runs:
    """The scripts the daemon ran or runs (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, Run] = {}

    def start(self, pool: str, script: Path, args: tuple[str, ...], environ: dict[str, str]) -> Run:
        """Run ``script`` (an absolute path) with ``args`` on the kept pool ``pool``, in
        ``environ``. OSError when the interpreter cannot be started."""
        process = subprocess.Popen(
            [sys.executable, str(script), *args], cwd=script.parent,
            env={**environ, ADOPT_ENV: pool, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        run = Run(secrets.token_hex(8), pool, str(script), args, process)
        with self._lock:
            self._runs[run.id] = run
        threading.Thread(target=run._follow, name=f"kept-run-{run.id}", daemon=True).start()
        return run

    def get(self, run_id: str) -> Run:
        """The run ``run_id``; LookupError naming it when there is none."""
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise LookupError(f"no run {run_id!r} (the daemon forgets its runs when it stops)")
        return run

    def running(self) -> bool:
        """Whether a script is still running."""
        with self._lock:
            return any(run.exit_code is None for run in self._runs.values())

    def stop(self) -> None:
        """Terminate the scripts still running (their process groups): SIGTERM, then
        SIGKILL after ``STOP_TIMEOUT`` seconds."""
        with self._lock:
            alive = [run for run in self._runs.values() if run.exit_code is None]
        for run in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for run in alive:
            try:
                run.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait(STOP_TIMEOUT)
