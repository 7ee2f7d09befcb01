"""What a user sees: the examples in a pipe and in a real terminal (tmux), the rich panel
of a real pool in a recorded console, and the log file."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from rich.console import Console as RichTerminal

import skyward as sky
from skyward.observe.rich_console import RichConsole

ROOT = Path(__file__).resolve().parents[2]
STAMPED = re.compile(r"^\d\d:\d\d:\d\d \S")


def run_example(name: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run examples/<name> with stdout and stderr piped, and HOME in ``home`` so the
    default log file lands there (a ``SKYWARD_HOME`` of the caller's would move it)."""
    env = {key: value for key, value in os.environ.items() if key != "SKYWARD_HOME"}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1")
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )


@sky.function
def shout(word: str) -> str:
    print(f"{word}!")
    return word.upper()


def test_in_a_pipe_the_console_falls_back_to_timestamped_log_lines(tmp_path: Path) -> None:
    done = run_example("observe_live.py", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(STAMPED.match(line) for line in lines), lines
    text = done.stderr
    assert re.search(r"pool pool-\w+: starting 2 nodes on local", text)
    assert re.search(r"pool pool-\w+: ready, 2 nodes in", text)
    assert "map slow_square: 400/400 (100%)" in text and "broadcast hostname: 2/2 (100%)" in text
    assert re.search(r"wall \d+\.\ds, cost \$0\.00 \(local pool, no charge\)$", lines[-1])
    assert re.search(r"^\d\d:\d\d:\d\d \[node \d\] reached item 0$", done.stdout, re.M)
    assert done.stdout.splitlines()[-1] == "sum of squares: 21253400; 2 greetings"
    log = (tmp_path / ".skyward" / "logs" / "skyward.log").read_text()
    assert re.search(r"INFO skyward\.task: \[node \d\] reached item 300", log)
    assert re.search(r"INFO skyward\.events: pool pool-\w+: ready", log)


def test_the_events_example_runs(tmp_path: Path) -> None:
    done = run_example("observe_events.py", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # console "silent"
    out = done.stdout
    assert "doubled: [0, 2, 4, 6]" in out and "map work: 4/4" in out
    assert "cost: $0.00" in out
    assert "metrics seen: ['cpu', 'load', 'memory']" in out
    assert "errors: ['a client-side problem']" in out, out  # the pool reported none of its own
    assert "lifecycle: ['ClusterReady', 'ClusterDestroyed', 'Error']" in out
    assert "log file has 4 task output lines" in out


def test_the_snapshot_example_writes_an_svg_of_the_panel(tmp_path: Path) -> None:
    target = tmp_path / "console.svg"
    done = run_example("observe_snapshot.py", tmp_path, str(target))
    assert done.returncode == 0, done.stderr
    svg = target.read_text()
    assert svg.startswith("<svg") and "map&#160;step" in svg and "4/4&#160;nodes" in svg


def test_the_rich_panel_of_a_real_pool_in_a_recorded_console(warm_ray: None) -> None:
    terminal = RichTerminal(record=True, width=110, force_terminal=True, color_system="truecolor")
    pool = sky.Compute(nodes=2, options=sky.Options(console=False, logging=False))
    console = RichConsole(pool.on, console=terminal, live=False)
    with pool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            "cpu" in state.metrics for state in console.view.nodes.values()
        ):
            time.sleep(0.1)
        assert pool.map(lambda x: x * 2, range(300)) == [2 * x for x in range(300)]
        shout("hi") >> pool
        terminal.print(console.renderable())
    console.close()
    text = terminal.export_text()
    assert re.search(r"\[node \d\] hi!", text)
    assert re.search(rf"skyward · {pool.name} · local · 2/2 nodes · ready", text)
    assert re.search(r"node\s+state\s+cpu\s+mem\s+done\s+task", text)
    assert len(re.findall(r"^│\s+[01]\s+idle\s+[█░]{10}\s+\d+%\s+[█░]{10}\s+\d+%\s+\d+\s+-", text, re.M)) == 2
    assert re.search(r"map <lambda>\s+━+\s+300/300", text)
    assert console.view.summary().startswith(f"pool {pool.name}: 2 nodes, ")


def test_minimal_console_prints_only_task_output(warm_ray: None, capsys) -> None:
    pool = sky.Compute(nodes=1, image=sky.Image(metrics=None), options=sky.Options(console="minimal", logging=False))
    with pool:
        shout("quiet") >> pool
    out, err = capsys.readouterr()
    assert out == "[node 0] quiet!\n" and err == ""


def test_log_config_writes_events_and_task_output_to_its_file(warm_ray: None, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "run.log"
    config = sky.LogConfig(level="DEBUG", file=str(path), console=False)
    logger = logging.getLogger("skyward")
    handlers = list(logger.handlers)
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=config)) as pool:
        shout("logged") >> pool
        assert len(logger.handlers) == len(handlers) + 2  # the file, and the pool's own file (sky logs)
    assert logger.handlers == handlers
    assert (tmp_path / "logs" / "pools" / f"{pool.id}.log").exists()
    text = path.read_text()
    assert re.search(r"INFO skyward\.task: \[node 0\] logged!", text)
    assert re.search(r"DEBUG skyward\.events: node 0: shout done in", text)
    assert re.search(r"INFO skyward\.events: pool pool-\w+: stopped after", text)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_live_panel_in_a_real_terminal(tmp_path: Path) -> None:
    session = f"skyward-test-{uuid.uuid4().hex[:8]}"
    command = (
        f"cd {ROOT} && HOME={tmp_path} {sys.executable} examples/observe_live.py; "
        f"echo EXIT=$?; sleep 60"
    )
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "110", "-y", "40", command], check=True)
    screens: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
            ).stdout
            screens.append(screen)
            if "EXIT=" in screen:
                break
            time.sleep(0.3)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    final = screens[-1]
    assert "EXIT=0" in final, final
    live = [s for s in screens if re.search(r"map slow_square\s+\S+.*\d+/400", s)]
    assert live, screens[-5:]
    assert any(re.search(r"node\s+state\s+cpu\s+mem\s+done\s+task", s) for s in live)
    assert any(re.search(r"\s0\s+busy\s+[█░]{10}", s) for s in live)
    assert re.search(r"╭─ skyward · pool-\w+ · local · 0/2 nodes · stopped", final)
    assert re.search(r"map slow_square\s+━+\s+400/400", final)
    assert re.search(r"\[node \d\] reached item 0", final)
    assert re.search(r"pool pool-\w+: 2 nodes, \d+ tasks, 400 items mapped, wall", final)
    assert "sum of squares: 21253400; 2 greetings" in final
