"""``sky config path|show|validate``: the skyward.toml in effect, its pools, and every
problem in it with the line it comes from."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import click
from msgspec import Struct

from skyward.cli.output import console, emit_json, emit_object, table

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Plain: TypeAlias = "str | int | float | bool | None | list[Plain]"
"""A value as ``sky config show`` prints it (JSON's scalars and lists)."""


@click.group()
def config() -> None:
    """skyward.toml: where it is, its pools, problems in it."""


@config.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def path(as_json: bool) -> None:
    """The skyward.toml in effect ($SKYWARD_CONFIG, ./skyward.toml or ~/.skyward/skyward.toml)."""
    from skyward.api.config_file import config_path

    found = config_path()
    if as_json:
        emit_object({"path": str(found) if found else None, "exists": bool(found and found.is_file())})
        return
    if found is None:
        raise click.ClickException("no skyward.toml: looked at $SKYWARD_CONFIG, ./skyward.toml and ~/.skyward/skyward.toml")
    click.echo(str(found))


@config.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def show(as_json: bool) -> None:
    """Each pool of skyward.toml as skyward reads it (provider, hardware, options)."""
    from skyward.api.config_file import pool_from_table, read_document

    found = _existing()
    document = read_document(found)
    rows: list[dict[str, object]] = []
    lines: list[tuple[str, Plain, str, str]] = []
    for name, pool_table in document.get("pools", {}).items():
        try:
            spec, options = pool_from_table(name, pool_table, document.get("defaults", {}), found)
        except (ValueError, TypeError) as exc:
            rows.append({"pool": name, "error": str(exc)})
            lines.append((name, "", "", str(exc)))
            continue
        fields = {k: _plain(v) for k, v in spec.non_defaults().items()}
        changed = {f.name: _plain(getattr(options, f.name)) for f in dataclasses.fields(options)
                   if getattr(options, f.name) != f.default}
        provider = _plain(spec.provider)
        rows.append({"pool": name, "provider": provider, "spec": fields, "options": changed})
        lines.append((name, provider, ", ".join(f"{k}={v}" for k, v in fields.items()),
                      ", ".join(f"{k}={v}" for k, v in changed.items())))
    if as_json:
        emit_json(rows)
        return
    table(str(found), ["pool", "provider", "spec", "options / error"], lines)


@config.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def validate(as_json: bool) -> None:
    """Load every pool; print each problem as ``file:line: [pools.NAME] message``. Exits 1
    when there is one."""
    from skyward.api.config_file import check_file

    problems = check_file(_existing())
    if as_json:
        emit_json(problems)
    elif problems:
        for problem in problems:
            click.echo(str(problem), err=True)
    else:
        console.print(f"{_existing()}: every pool loads")
    if problems:
        raise SystemExit(1)


def _existing() -> Path:
    from skyward.api.config_file import config_path

    found = config_path()
    if found is None or not found.is_file():
        raise click.ClickException(f"no skyward.toml found ({found or './skyward.toml, ~/.skyward/skyward.toml'})")
    return found


def _plain(value: object) -> Plain:
    if isinstance(value, Struct) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return f"{type(value).__name__}({', '.join(f'{k}={_plain(v)!r}' for k, v in _fields(value).items())})"
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _fields(value: DataclassInstance | Struct) -> dict[str, object]:
    """The fields ``value`` was given that differ from its class's defaults."""
    default = type(value)() if _has_defaults(value) else None
    if isinstance(value, Struct):
        names = list(value.__struct_fields__)
    else:
        names = [f.name for f in dataclasses.fields(value) if f.init]
    return {name: getattr(value, name) for name in names
            if default is None or getattr(value, name) != getattr(default, name)}


def _has_defaults(value: object) -> bool:
    try:
        type(value)()
    except Exception:
        return False
    return True
