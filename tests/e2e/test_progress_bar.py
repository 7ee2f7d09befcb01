"""``pool.map(..., progress=True)`` and ``sky.gather(..., progress=True)``: a bar with the
count, the rate and the time left on standard error in a terminal (a real PTY), for a
plain and a streamed map and gather; nothing in a pipe. The notebook's bar is checked by tests/e2e/test_kept_notebook.py."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import time, skyward as sky

@sky.function
def slow(x):
    time.sleep(0.01)
    return x

with sky.Compute(nodes=2, console=False) as pool:
    assert pool.map(slow, range(120), progress=True) == list(range(120))
    assert list(pool.map(slow, range(30), stream=True, progress=True)) == list(range(30))
    assert (sky.gather(*(slow(i) for i in range(9)), progress=True) >> pool) == tuple(range(9))
    streamed = sky.gather(*(slow(i) for i in range(12)), stream=True, ordered=False, progress=True) >> pool
    assert sorted(streamed) == list(range(12))
    assert pool.map(slow, range(20)) == list(range(20))
print("DONE", flush=True)
"""


def in_a_terminal(script: Path, env: dict[str, str]) -> tuple[int, str]:
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, str(script)], stdin=terminal, stdout=terminal, stderr=terminal,
                               env={**env, "TERM": "xterm", "COLUMNS": "100"}, start_new_session=True)
    os.close(terminal)
    seen = b""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the other end closed: the script exited
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    return process.wait(30), seen.decode(errors="replace")


def test_a_maps_progress_bar_in_a_terminal_and_nothing_in_a_pipe(sandbox: dict, tmp_path: Path) -> None:
    script = tmp_path / "bar.py"
    script.write_text(SCRIPT)
    code, shown = in_a_terminal(script, sandbox["env"])
    assert code == 0 and "DONE" in shown, shown[-2000:]
    assert "120/120" in shown and "30/30" in shown and "100%" in shown, shown[-2000:]
    assert "9/9" in shown and "12/12" in shown, "a gather's bar, plain and streamed"
    assert "/s" in shown, "the rate"
    assert re.search(r"(?<!\d)\d:\d\d:\d\d(?!\d)", shown), "the time left"
    assert "20/20" not in shown, "a map without progress=True draws no bar"
    piped = subprocess.run([sys.executable, str(script)], env=sandbox["env"], capture_output=True, text=True, timeout=180)
    assert piped.returncode == 0 and piped.stdout.strip() == "DONE", piped.stdout + piped.stderr
    assert "120/120" not in piped.stderr and "━" not in piped.stderr, piped.stderr
