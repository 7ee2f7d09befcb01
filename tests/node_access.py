"""What a user does to reach a kept pool's nodes from the command line, checked the same
way on every provider (tests/e2e/cli/test_node_access.py, tests/e2e/ssh/test_node_access_ssh.py):
``sky cp`` a tree to every node and back, a file from each node, ``sky ssh`` through a
real PTY and with a command, and ``sky logs --export`` in its three formats."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import nbformat

SKY = os.path.join(os.path.dirname(sys.executable), "sky")


def sky(env: dict[str, str], *args: str, code: int = 0) -> str:
    done = subprocess.run([SKY, *args], env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == code, f"sky {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def check_copy(env: dict[str, str], name: str, nodes: int, local: Path, remote: str) -> None:
    """A tree (a 20 MB file: three chunks; an empty file; modes) to every node's ``remote``
    directory and back from node 1; one file from every node; bad input refused."""
    tree = local / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "big.bin").write_bytes(os.urandom(20_000_000))
    (tree / "empty").write_bytes(b"")
    (tree / "run.sh").write_text("echo ran\n")
    (tree / "run.sh").chmod(0o750)
    (tree / "sub" / "big.bin").chmod(0o444)  # read-only, and three chunks: its mode is set after the last
    sent = json.loads(sky(env, "cp", str(tree), f"{name}:{remote}/", "--all", "--json"))
    assert (sent["files"], sent["bytes"], sent["nodes"]) == (3, 20_000_009, list(range(nodes))), sent
    back = local / "back"
    got = json.loads(sky(env, "cp", f"{name}:{remote}/tree", str(back), "--node", "1", "--json"))
    assert (got["files"], got["bytes"]) == (3, 20_000_009), got
    for relative in ("sub/big.bin", "empty", "run.sh"):
        assert (back / relative).read_bytes() == (tree / relative).read_bytes(), relative
    assert (back / "run.sh").stat().st_mode & 0o777 == 0o750
    assert (back / "sub" / "big.bin").stat().st_mode & 0o777 == 0o444
    assert sorted(path.name for path in back.rglob("*") if path.is_file()) == ["big.bin", "empty", "run.sh"], \
        "a file half written (.sky-part) is left on the node"
    slash = local / "newdir"
    sky(env, "cp", f"{name}:{remote}/tree/empty", f"{slash}/")
    assert (slash / "empty").is_file(), "a destination ending in / is a directory to copy into"
    every = local / "every"
    sky(env, "cp", f"{name}:{remote}/tree/run.sh", str(every), "--all")
    assert sorted(path.relative_to(every).as_posix() for path in every.rglob("*.sh")) == [
        f"node-{node}/run.sh" for node in range(nodes)
    ]
    assert "no such file or directory on node 0" in sky(env, "cp", f"{name}:{remote}/nope", str(local / "x"), code=1)
    assert "the pool has nodes 0 to" in sky(env, "cp", str(tree), f"{name}:{remote}", "--node", str(nodes), code=2)
    assert "one of SOURCE and DESTINATION" in sky(env, "cp", str(tree), str(local / "y"), code=2)


def check_shell(env: dict[str, str], name: str, node: int) -> str:
    """``sky ssh`` to node ``node`` through a PTY: the shell runs commands, has a terminal,
    and its exit status is the command's; then a command given on the line. The
    interactive shell's output."""
    controller, terminal = pty.openpty()
    shell = subprocess.Popen([SKY, "ssh", name, "--node", str(node)], stdin=terminal, stdout=terminal, stderr=terminal,
                             env={**env, "TERM": "dumb"}, start_new_session=True)
    os.close(terminal)
    os.write(controller, b"echo MARK-$((6*7)); test -t 0 && echo IS-A-TTY; pwd; exit 7\n")
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 1)
        if ready:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal's other end closed: the shell exited
                break
            if not chunk:
                break
            seen += chunk
        elif shell.poll() is not None:
            break
    os.close(controller)
    output = seen.decode(errors="replace")
    assert shell.wait(30) == 7, output
    assert "MARK-42" in output and "IS-A-TTY" in output, output
    assert sky(env, "ssh", name, "--node", str(node), "echo", "$((2+3))", ";", "exit", "4", code=4).strip() == "5"
    return output


def check_export(env: dict[str, str], name: str, local: Path, printed: str) -> None:
    """``sky logs NAME --export``: JSON lines with each node's output, a Markdown report,
    a notebook nbformat accepts; ``printed`` is a line every node's task printed."""
    lines = [json.loads(line) for line in sky(env, "logs", name, "--export", "jsonl").splitlines()]
    outputs = {(record["node"], record["message"]) for record in lines if record["kind"] == "output"}
    assert (0, printed) in outputs and (1, printed) in outputs, lines
    assert any(record["kind"] == "event" for record in lines)
    report = sky(env, "logs", name, "--export", "md")
    assert report.startswith(f"# Pool {name}") and "## Events" in report and "## Output of node 1" in report
    notebook = local / "log.ipynb"
    sky(env, "logs", name, "--export", "ipynb", "--output", str(notebook))
    parsed = nbformat.read(str(notebook), as_version=4)
    nbformat.validate(parsed)
    streams = [output["text"] for cell in parsed.cells if cell.cell_type == "code" for output in cell.outputs]
    assert any(printed in text for text in streams), streams
