"""Pool exit leaves nothing behind: normal exit, exceptions, Ctrl-C, a killed client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sandbox import marked_under, wait_for_no_processes
from terminal import like_a_terminal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

PRELUDE = """
import os, sys, time
import skyward as sky
from skyward.providers.local.ray_instance import LocalRay

@sky.function
def work(x):
    return x + 1

@sky.function
def announce_then_sleep():
    print("task started", flush=True)
    time.sleep(120)
"""


def everything_under(path: str) -> list[str]:
    return [os.path.join(d, f) for d, dirs, files in os.walk(path) for f in files + dirs]


def start(sandbox: dict, body: str) -> subprocess.Popen[str]:
    source = PRELUDE + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", source], cwd=ROOT, env=sandbox["env"],  # type: ignore[arg-type]
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=like_a_terminal,
    )


def read_until(process: subprocess.Popen[str], text: str, timeout: float = 90) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if text in line:
            return lines
    raise AssertionError(f"never saw {text!r}; output: {lines}")


@pytest.mark.parametrize("ending", ["normal", "exception"])
def test_exit_leaves_no_process_and_no_file(sandbox: dict, ending: str) -> None:
    body = f"""
    try:
        with sky.Compute(nodes=4, options=sky.Options(console=False)) as pool:
            print("TEMP", LocalRay.temp_dir(), flush=True)
            assert pool.map(work, range(100)) == list(range(1, 101))
            assert work(1) @ pool == [2, 2, 2, 2]
            if {ending == "exception"!r}:
                raise KeyError("boom")
    except KeyError:
        print("caught", flush=True)
    import psutil
    left = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(child.cmdline())[:120])
        except psutil.NoSuchProcess:
            pass
    print("LEFT", left, flush=True)
    print("DONE", flush=True)
    """
    process = start(sandbox, body)
    lines = read_until(process, "DONE")
    assert process.wait(timeout=60) == 0, lines
    assert "LEFT []" in lines, lines  # nothing of the pool outlives its close (its reaper included)
    temp_dir = next(line.split()[1] for line in lines if line.startswith("TEMP"))
    assert temp_dir.startswith(sandbox["tmp"])
    assert wait_for_no_processes(temp_dir, within=10) == []
    logs = os.path.join(sandbox["home"], ".skyward", "logs")
    leftovers = [p for p in everything_under(sandbox["home"]) if not (p.startswith(logs) or logs.startswith(p))]
    assert leftovers == [] and everything_under(sandbox["tmp"]) == []


def test_ctrl_c_cancels_running_tasks_and_cleans_up(sandbox: dict) -> None:
    body = """
    with sky.Compute(nodes=2, options=sky.Options(console="minimal", logging=False)) as pool:
        print("TEMP", LocalRay.temp_dir(), flush=True)
        announce_then_sleep() >> pool
    """
    process = start(sandbox, body)
    lines = read_until(process, "task started")
    temp_dir = next(line.split()[1] for line in lines if line.startswith("TEMP"))
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert time.monotonic() - started < 30
    assert process.returncode == -signal.SIGINT, (process.returncode, output)  # a shell shows 130
    assert "KeyboardInterrupt: interrupted (Ctrl-C)" in output, output
    assert "CancelledError" not in output and "threading.py" not in output and "interruptible.py" not in output, output
    assert wait_for_no_processes(temp_dir, within=10) == []
    assert everything_under(sandbox["tmp"]) == []


def test_killed_client_takes_its_nodes_down(sandbox: dict) -> None:
    body = """
    with sky.Compute(nodes=2, options=sky.Options(console="minimal", logging=False)) as pool:
        print("TEMP", LocalRay.temp_dir(), flush=True)
        announce_then_sleep() >> pool
    """
    process = start(sandbox, body)
    lines = read_until(process, "task started")
    temp_dir = next(line.split()[1] for line in lines if line.startswith("TEMP"))
    process.kill()
    process.wait(timeout=30)
    assert wait_for_no_processes(temp_dir, within=30) == []


HELD_AGENTS = """
import contextlib

@contextlib.contextmanager
def held(info):  # each agent's start takes 30 s: a Ctrl-C lands while the pool waits for them
    time.sleep(30)
    yield

PLUGINS = [sky.plugins.Plugin(name="held", around_app=held)]
"""
OPENING = """
sky.Compute, sky.Options  # imported on first use: here, before the clock starts
print("OPENING", flush=True)
with sky.Compute(nodes=2, plugins=PLUGINS, options=sky.Options(console=False, logging=False)) as pool:
    print("OPEN", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("during", ["ray", "agents"])
def test_ctrl_c_while_the_pool_opens_leaves_nothing(sandbox: dict, during: str) -> None:
    """Ctrl-C while Ray starts (0.3 s in) or while the agents start (once an agent's
    process runs, the agents held in their start by a plugin)."""
    body = (HELD_AGENTS if during == "agents" else "PLUGINS = []\n") + OPENING
    process = start(sandbox, body)
    read_until(process, "OPENING")
    if during == "ray":
        time.sleep(0.3)
    else:
        deadline = time.monotonic() + 60
        while not any("NodeAgent" in line for line in marked_under(sandbox["tmp"])):
            assert time.monotonic() < deadline and process.poll() is None, "no agent ever started"
            time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=60)
    finally:
        process.kill()
    assert "OPEN\n" not in output, output
    assert "KeyboardInterrupt: interrupted (Ctrl-C)" in output, output
    assert process.returncode == -signal.SIGINT, (process.returncode, output)  # 130 in every phase, not 1
    assert "threading.py" not in output and "ray_instance.py" not in output, output
    deadline = time.monotonic() + 10
    while (marked_under(sandbox["tmp"]) or everything_under(sandbox["tmp"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked_under(sandbox["tmp"]) == [] and everything_under(sandbox["tmp"]) == []


def test_a_ctrl_c_taken_by_another_thread_still_ends_each_wait(sandbox: dict) -> None:
    """Python raises KeyboardInterrupt in the main thread between two bytecodes; a SIGINT
    whose handler ran just before the main thread blocked would wait for the end of the
    task (120 s here). Sending it to another thread makes that race certain: each way of
    waiting for a result must still end within a slice."""
    body = """
    import signal, threading

    def interrupt_soon():
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread, not the main one

    waits = {
        ">>": lambda pool: announce_then_sleep() >> pool,
        "> then result()": lambda pool: (announce_then_sleep() > pool).result(),
        "map": lambda pool: pool.map(lambda _: time.sleep(120), range(2)),
        "map(stream=True)": lambda pool: list(pool.map(lambda _: time.sleep(120), range(2), stream=True)),
        "gather(stream=True)": lambda pool: list(sky.gather(announce_then_sleep(), stream=True) >> pool),
    }

    class Done(Exception):
        pass

    try:
        with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False,
                                                      worker=sky.Worker(concurrency=6))) as pool:
            for name, wait in waits.items():
                threading.Thread(target=interrupt_soon).start()
                started = time.monotonic()
                try:
                    wait(pool)
                except KeyboardInterrupt:
                    print(f"ENDED {name} {time.monotonic() - started:.2f}", flush=True)
            raise Done
    except Done:
        print("DONE", flush=True)
    """
    process = start(sandbox, body)
    try:
        lines = read_until(process, "DONE", timeout=120)
    finally:
        process.kill()
        process.wait()
    ended = {line.rsplit(" ", 1)[0][6:]: float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("ENDED ")}
    assert list(ended) == [">>", "> then result()", "map", "map(stream=True)", "gather(stream=True)"], lines
    assert max(ended.values()) < 5, ended
