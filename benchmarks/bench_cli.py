"""CLI — how long a `sky` command takes to answer, against the peers' command lines.

    .venv/bin/python -m benchmarks.run --only cli

Each command runs as a user types it: a fresh process, wall time from start to exit,
in a fresh $SKYWARD_HOME with one kept 1-node local pool (so `sky ls` asks the pool
daemon, as it does for a user who keeps pools). The floor is `python -c pass`; the peers
are `ray --help` and `dask --help` (their lightest commands). The commands take turns
run by run. Issue 42's target: every `sky` command answers within 0.3 s on this machine
(those that open pools or ask a cloud answer their `--help` within it: the work they
start is timed by the other groups).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from benchmarks.common import Row, failed_row, row

GROUP = "CLI"
TITLE = "CLI — a command's answer time (fresh process), `sky` against Ray's and Dask's"
BIN = os.path.dirname(sys.executable)
COMMANDS = {
    "python -c pass (the floor)": [sys.executable, "-c", "pass"],
    "sky --help": [os.path.join(BIN, "sky"), "--help"],
    "sky version": [os.path.join(BIN, "sky"), "version"],
    "sky ls, one kept pool": [os.path.join(BIN, "sky"), "ls"],
    "sky logs NAME -n 5": [os.path.join(BIN, "sky"), "logs", "bench", "-n", "5"],
    "sky events NAME": [os.path.join(BIN, "sky"), "events", "bench"],
    "sky api": [os.path.join(BIN, "sky"), "api"],
    "sky offers --help": [os.path.join(BIN, "sky"), "offers", "--help"],
    "ray --help": [os.path.join(BIN, "ray"), "--help"],
    "dask --help": [os.path.join(BIN, "dask"), "--help"],
}


def run(quick: bool = False) -> list[Row]:
    runs = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="skybench-cli-") as home:
        env = {**os.environ, "SKYWARD_HOME": home}
        sky = os.path.join(BIN, "sky")
        opened = subprocess.run([sky, "up", "bench", "--nodes", "1", "--keep-alive", "300"], env=env,
                                capture_output=True, text=True, timeout=300, check=False)
        if opened.returncode != 0:
            return [failed_row(GROUP, "sky up bench", opened.stdout[-500:] + opened.stderr[-500:])]
        try:
            return _alternated(env, runs)
        finally:
            subprocess.run([sky, "down", "--all"], env=env, capture_output=True, timeout=300, check=False)


def _alternated(env: dict[str, str], runs: int) -> list[Row]:
    """Each command ``runs`` times, the commands taking turns run by run; the first
    round warms the file cache and is not counted. A command that fails is not run
    again: its row says why."""
    samples: dict[str, list[float]] = {subject: [] for subject in COMMANDS}
    failed: dict[str, str] = {
        subject: f"not installed: {command[0]}" for subject, command in COMMANDS.items() if not os.path.exists(command[0])
    }
    for _ in range(runs + 1):
        for subject, command in COMMANDS.items():
            if subject in failed:
                continue
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
            samples[subject].append(time.perf_counter() - started)
            if done.returncode != 0:
                failed[subject] = f"exit {done.returncode}: {done.stderr[-300:]!r}"
    return [
        failed_row(GROUP, subject, failed[subject]) if subject in failed
        else row(GROUP, subject, samples[subject][1:], "fresh process, start to exit", metric="answer")
        for subject in COMMANDS
    ]


if __name__ == "__main__":
    for found in run("--quick" in sys.argv):
        print(f"{found['subject']:32} {found.get('median_s', float('nan')):.3f}s")
