"""A local pool opened in a Jupyter kernel (nbclient, a real kernel): the map runs with
its progress bar, and nothing of Ray's own notebook notices (ipywidgets, tqdm's
IProgress) reaches the cells' output."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

CELLS = (
    "import skyward as sky\npool = sky.Compute(nodes=1).__enter__()",
    "print('MAP', pool.map(lambda x: x + 1, range(3), progress=True))",
    "pool.__exit__(None, None, None)",
)


def test_a_local_pool_in_a_notebook_shows_no_notice_of_rays(
    sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in sandbox["env"].items():  # the kernel inherits this process's environment
        monkeypatch.setenv(key, value)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = "\n".join(
        str(output.get("text") or output.get("data")) for cell in notebook.cells for output in cell.get("outputs", ())
    )
    assert "MAP [1, 2, 3]" in shown, shown
    assert "<progress" in shown, "progress=True draws its bar in the notebook"
    assert "ipywidgets" not in shown and "IProgress" not in shown, shown
