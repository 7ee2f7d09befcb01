"""A Jupyter notebook adopts a kept pool by name (examples/kept_pool.ipynb, executed
through a real kernel with nbclient): tasks, a collection and a map run from its cells
on the pool's nodes (the map with its progress bar), and the pool stays kept when the
notebook closes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from sandbox import wait_for_no_processes

from skyward.providers import daemon_client

ROOT = Path(__file__).resolve().parents[2]
SKY = os.path.join(os.path.dirname(sys.executable), "sky")


def outputs(notebook: nbformat.NotebookNode) -> dict[str, str]:
    """The notebook's printed ``KEY value`` lines."""
    found = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", ()):
            for line in output.get("text", "").splitlines():
                key, _, value = line.partition(" ")
                found[key] = value
    return found


def test_a_notebook_adopts_a_kept_pool_by_name(
    sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path(sandbox["home"]) / ".skyward")
    monkeypatch.setenv("SKYWARD_HOME", home)
    env = {**sandbox["env"], "SKYWARD_HOME": home}
    up = subprocess.run([SKY, "up", "nb", "--nodes", "2", "--keep-alive", "300", "--json"], env=env, cwd=tmp_path,
                        capture_output=True, text=True, timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        notebook = nbformat.read(ROOT / "examples" / "kept_pool.ipynb", as_version=4)
        for key, value in env.items():  # the kernel inherits this process's environment
            monkeypatch.setenv(key, value)
        NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
        seen = outputs(notebook)
        nodes = json.loads(seen["NODES"])
        [kept] = daemon_client.kept_pools()
        assert (kept.name, kept.nodes, kept.holder) == ("nb", 2, 0)  # still kept, and let go
        assert len(set(nodes)) == 2
        assert seen["COUNTER"] == "1"
        assert json.loads(seen["MAP"]) == [x * x for x in range(10)]
        bars = [output["data"]["text/html"] for cell in notebook.cells for output in cell.get("outputs", ())
                if output.get("output_type") in ("display_data", "update_display_data") and "text/html" in output.get("data", {})]
        assert any('<progress value="10" max="10"' in bar for bar in bars), bars  # progress=True, drawn in place
    finally:
        down = subprocess.run([SKY, "down", "--all"], env=env, capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []
