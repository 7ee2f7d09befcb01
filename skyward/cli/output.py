"""How the ``sky`` command prints: rich tables for people, ``--json`` for scripts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import click
from msgspec import Struct, to_builtins
from rich import box
from rich.console import Console
from rich.table import Table

console = Console(soft_wrap=True)  # a long path stays on one line, as scripts that read it expect


def emit_json(rows: Sequence[object]) -> None:
    """``rows`` (dataclasses, ``msgspec.Struct``s or dicts), the answer of a command about
    many things, as one JSON array on stdout."""
    click.echo(json.dumps([_plain(row) for row in rows], default=str))


def emit_object(thing: object) -> None:
    """``thing`` (a dataclass, a ``msgspec.Struct`` or a dict), the answer of a command
    about one thing, as one JSON object on stdout."""
    click.echo(json.dumps(_plain(thing), default=str))


def _plain(thing: object) -> object:
    if isinstance(thing, Struct):
        return to_builtins(thing)
    return dataclasses.asdict(thing) if dataclasses.is_dataclass(thing) and not isinstance(thing, type) else thing


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A rich table on stdout."""
    shown = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=0, show_edge=False)
    for column in columns:
        shown.add_column(column, justify="right" if column.startswith(("$", "#")) else "left")
    for row in rows:
        shown.add_row(*(str(cell) for cell in row))
    console.print(shown)
