"""How the ``sky`` command prints: rich tables for people, ``--json`` for scripts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

console = Console(soft_wrap=True)  # a long path stays on one line, as scripts that read it expect


def emit_json(rows: Sequence[object]) -> None:
    """``rows`` (dataclasses or dicts) as one JSON array on stdout."""
    click.echo(json.dumps([dataclasses.asdict(r) if dataclasses.is_dataclass(r) and not isinstance(r, type) else r for r in rows], default=str))


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A rich table on stdout."""
    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(column, justify="right" if column.startswith(("$", "#")) else "left")
    for row in rows:
        shown.add_row(*(str(cell) for cell in row))
    console.print(shown)
