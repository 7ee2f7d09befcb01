"""Where a progress bar is drawn as HTML: in every Jupyter kernel's shell, Google Colab's
included (its shell is a subclass of ipykernel's), and not in a terminal IPython."""

from __future__ import annotations

import IPython
import pytest
from ipykernel.zmqshell import ZMQInteractiveShell
from IPython.terminal.interactiveshell import TerminalInteractiveShell

from skyward.observe import progress_bar


class Shell(ZMQInteractiveShell):
    """As ``google.colab._shell.Shell`` is declared."""


Shell.__module__ = "google.colab._shell"


@pytest.mark.parametrize(("kind", "html"), [
    (ZMQInteractiveShell, True),
    (Shell, True),
    (TerminalInteractiveShell, False),
])
def test_a_kernels_shell_draws_html_and_a_terminals_does_not(
    monkeypatch: pytest.MonkeyPatch, kind: type, html: bool
) -> None:
    shell = kind.__new__(kind)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert progress_bar._in_notebook() is html
