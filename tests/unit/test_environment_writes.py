"""Where skyward changes a process's environment or working directory: only in a process
whose environment it is to set, never in the pool daemon, which serves many clients
from one process (a remote kept pool runs under its client's environment in a host
process of its own, ``daemon.pool_host``). Read from the source with ``ast``, so a new
write anywhere fails here until it is placed and said why."""

from __future__ import annotations

import ast
from pathlib import Path

import skyward

PACKAGE = Path(skyward.__file__).parent

ALLOWED = {
    "node/agent.py": "a node agent's own process takes the client's environment and directory before it serves",
    "node/process_worker.py": "a worker process takes its agent's directory before it serves",
    "providers/local/ray_instance.py": "Ray reads its token and settings only from the environment; restored after",
    "providers/ray/attach.py": "the same, attaching to a Ray cluster; restored after",
    "providers/ray_start.py": (
        "Ray's processes read how often to retry a connection only from the environment: set "
        "for a start (the client's own Ray, or a `ray start` process of its own), restored after"
    ),
    "cli/run.py": "`sky run` runs the user's script in this process, with the variables it adopts a pool by",
    "integrations/decorators.py": "in a task's process: torch.distributed, Keras and TensorFlow read these variables",
    "plugins/nvidia.py": "in a task's process: CUDA reads CUDA_VISIBLE_DEVICES",
    "plugins/torch_group.py": "in a task's process: torch.distributed and gloo read these variables",
}
"""The modules that may, and why."""
WRITES = frozenset({"update", "clear", "pop", "popitem", "setdefault"})


def _is_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute) and node.attr == "environ"
        and isinstance(node.value, ast.Name) and node.value.id == "os"
    )


def _writes(tree: ast.AST) -> list[int]:
    """The lines that change ``os.environ`` or the working directory."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func
            if (_is_environ(method.value) and method.attr in WRITES) or (
                isinstance(method.value, ast.Name) and method.value.id == "os" and method.attr in ("chdir", "putenv")
            ):
                lines.append(node.lineno)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        lines += [t.lineno for t in targets if isinstance(t, ast.Subscript) and _is_environ(t.value)]
    return sorted(lines)


def test_only_processes_whose_environment_it_is_change_it() -> None:
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _writes(ast.parse(path.read_text(), str(path))))
    }
    unexplained = {module: lines for module, lines in found.items() if module not in ALLOWED}
    assert unexplained == {}, "a new write to os.environ or the working directory: place it, or add it to ALLOWED"
    assert not [module for module in found if module.startswith(("daemon/", "providers/kept/"))]
    assert set(found) == set(ALLOWED), f"allowed but gone (remove from ALLOWED): {set(ALLOWED) - set(found)}"


def test_the_check_finds_each_kind_of_write() -> None:
    source = """
import os
os.environ["A"] = "1"
os.environ.update(B="2")
os.environ.clear()
del os.environ["A"]
os.chdir("/")
os.putenv("C", "3")
x = os.environ.get("D")
"""
    assert _writes(ast.parse(source)) == [3, 4, 5, 6, 7, 8]
