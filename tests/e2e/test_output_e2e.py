"""Task output reaches the client live, prefixed with the node."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from fake_cluster import skip_if_fake

import skyward as sky

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def run_script(source: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )


def test_prints_arrive_while_the_task_runs() -> None:
    script = textwrap.dedent(
        """
        import sys, time
        import skyward as sky

        @sky.function
        def talk():
            print("first", flush=True)
            time.sleep(3)
            print("second")
            return "result"

        with sky.Compute(nodes=1, options=sky.Options(console="minimal", logging=False)) as pool:
            print("RESULT", talk() >> pool, flush=True)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-u", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    seen: list[tuple[float, str]] = []
    assert process.stdout is not None
    for line in process.stdout:
        seen.append((time.monotonic(), line.rstrip("\n")))
    process.wait(timeout=60)
    lines = [line for _, line in seen]
    assert lines == ["[node 0] first", "[node 0] second", "RESULT result"], (lines, process.stderr.read())
    assert seen[1][0] - seen[0][0] >= 2.0, "the first line must arrive before the task ends"


def test_stderr_and_node_prefixes() -> None:
    result = run_script(
        """
        import sys
        import skyward as sky

        @sky.function
        def both():
            print("to out")
            print("to err", file=sys.stderr)

        with sky.Compute(nodes=2, options=sky.Options(console="minimal", logging=False)) as pool:
            both() @ pool
        """
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[node 0] to out", "[node 1] to out"]
    assert "[node 0] to err" in result.stderr and "[node 1] to err" in result.stderr


def test_output_filters_inside_tasks(pool4: sky.Pool) -> None:
    skip_if_fake(pool4, 'task output capture under pytest')
    lines: list[sky.Log] = []
    unsubscribe = pool4.on(sky.Log, lines.append)

    @sky.stdout(only="head")
    @sky.function
    def head_only():
        print("head says hi")

    @sky.stderr(only=lambda info: info.node in (1, 2))
    @sky.function
    def some_errs():
        import sys

        print("err line", file=sys.stderr)

    @sky.silent
    @sky.function
    def quiet():
        print("never")
        return 1

    @sky.function
    def captured():
        got: list[str] = []
        with sky.redirect_output(got.append):
            print("inside")
        return got

    try:
        head_only() @ pool4
        some_errs() @ pool4
        assert quiet() @ pool4 == [1, 1, 1, 1]
        assert captured() >> pool4 == ["inside"]
    finally:
        unsubscribe()
    texts = [(event.node, event.stream, event.line) for event in lines]
    assert texts.count((0, "stdout", "head says hi")) == 1
    assert sorted(n for n, s, t in texts if t == "err line") == [1, 2]
    assert not any(t in ("never", "inside") for _, _, t in texts)
