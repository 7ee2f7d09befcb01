"""Named pools from ``skyward.toml``: ``sky.Compute(name="train")``.

The file is ``$SKYWARD_CONFIG`` if set, else ``./skyward.toml``, else
``~/.skyward/skyward.toml``. Each ``[pools.NAME]`` table holds Spec fields; ``provider``
is a name ("local", "aws", "runpod", "vastai", "verda", "digitalocean", "novita",
"hyperstack", "tensordock", "vultr", "gcp", "scaleway", "jarvislabs", "massedcompute", "ssh", "ray") or a table with ``type`` and the provider's fields (``container_image =
"nvidia/cuda:12.8.0-base-ubuntu24.04"`` for RunPod); ``accelerator`` is a string such
as "A100", "A100-40GB" or "H100:8" (``parse_accelerator``, through the catalog); ``image``
and ``options`` (with an ``options.worker`` table) are tables. A ``[defaults]`` table
holds fields every pool gets unless it sets them (its ``options`` are merged key by key).

``check_file`` reads every pool and returns each problem with the line it comes from
(``sky config validate``).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyward.core import accelerators
from skyward.core.accelerators import Accelerator
from skyward.image.image import Image, PipIndex
from skyward.model.spec import OPTION_FIELDS, SPEC_FIELDS, Nodes, Options, Spec, Worker
from skyward.observe.log_config import LogConfig

if TYPE_CHECKING:
    from skyward.providers.base import Provider

_TOML_LINE = re.compile(r"at line (\d+)")
_FIELD = re.compile(r"(?:\.|^|\s)([a-z_]+)=")
_UNKNOWN = re.compile(r"unknown keyword ([A-Za-z_][A-Za-z0-9_]*)=")


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong in skyward.toml: where (``line``, 1-based) and what."""

    path: str
    line: int
    pool: str | None
    message: str

    def __str__(self) -> str:
        named = self.pool and not self.message.startswith(f"[pools.{self.pool}.")  # a sub-table names it
        where = f" [pools.{self.pool}]" if named else ""
        return f"{self.path}:{self.line}:{where} {self.message}"


def config_path() -> Path | None:
    """The skyward.toml in effect, or None when there is none."""
    explicit = os.environ.get("SKYWARD_CONFIG")
    if explicit:
        return Path(explicit)
    for candidate in (Path.cwd() / "skyward.toml", Path.home() / ".skyward" / "skyward.toml"):
        if candidate.is_file():
            return candidate
    return None


def read_document(path: Path) -> dict[str, Any]:
    """The parsed file; ValueError with the line for TOML errors."""
    with path.open("rb") as handle:
        try:
            return tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path} is not valid TOML: {exc}") from None


def load_named_pool(name: str) -> tuple[Spec, Options]:
    """The Spec and Options of ``[pools.NAME]``; ValueError naming what is wrong."""
    path = config_path()
    if path is None or not path.is_file():
        raise ValueError(
            f"Compute(name={name!r}) needs a skyward.toml with a [pools.{name}] table; "
            "none was found in ./skyward.toml, ~/.skyward/skyward.toml or $SKYWARD_CONFIG"
        )
    document = read_document(path)
    pools = document.get("pools", {})
    if name not in pools:
        known = ", ".join(sorted(pools)) or "none"
        raise ValueError(f"{path} has no [pools.{name}] table (pools defined: {known})")
    return pool_from_table(name, pools[name], document.get("defaults", {}), path)


def pool_from_table(name: str, table: dict[str, Any], defaults: dict[str, Any], path: Path) -> tuple[Spec, Options]:
    """One pool's Spec and Options, ``defaults`` filled in; ValueError naming the problem."""
    merged = {**defaults, **table}
    merged["options"] = {**defaults.get("options", {}), **table.get("options", {})}
    table = dict(merged)
    options = _options(table.pop("options", {}), f"{path} [pools.{name}.options]")
    table["provider"] = _provider(table.get("provider", "local"), path, name)
    if "accelerator" in table:
        table["accelerator"] = _accelerator(table["accelerator"])
    if "nodes" in table:
        nodes = table["nodes"]
        table["nodes"] = Nodes(**nodes) if isinstance(nodes, dict) else tuple(nodes) if isinstance(nodes, list) else nodes
    if "image" in table:
        image = dict(table["image"])
        image["pip_indexes"] = tuple(PipIndex(**i) for i in image.get("pip_indexes", ()))
        try:
            table["image"] = Image(**image)
        except TypeError as exc:
            raise ValueError(f"{path} [pools.{name}.image]: {exc}") from None
    _misplaced_options(name, table, path)
    try:  # the table's values are TOML's: Spec checks each
        return Spec(**table), options
    except TypeError as exc:
        raise ValueError(f"{path} [pools.{name}]: {exc}") from None


def _misplaced_options(name: str, table: dict[str, Any], path: Path) -> None:
    """ValueError for a key of the pool's table that is (or is close to) an Options
    field, naming the table it belongs in."""
    import difflib  # a config file's check alone: not on every open's path

    for key in table:
        if key in SPEC_FIELDS:
            continue
        close = [key] if key in OPTION_FIELDS else difflib.get_close_matches(key, OPTION_FIELDS, n=1, cutoff=0.8)
        if close and not difflib.get_close_matches(key, SPEC_FIELDS, n=1, cutoff=0.8):
            meant = "" if close[0] == key else f" (did you mean {close[0]}?)"
            raise ValueError(
                f"{path} [pools.{name}] unknown keyword {key}={meant}: an Options field, which goes in the "
                f"[pools.{name}.options] table"
            )


def check_file(path: Path) -> list[Problem]:
    """Every problem of the file at ``path``, each with its line (empty: all pools load)."""
    text = path.read_text()
    try:
        document = read_document(path)
    except ValueError as exc:
        match = _TOML_LINE.search(str(exc))
        return [Problem(str(path), int(match.group(1)) if match else 1, None, str(exc))]
    pools = document.get("pools", {})
    if not pools:
        return [Problem(str(path), 1, None, "no [pools.NAME] table; add one such as [pools.default] with provider = \"local\"")]
    problems = []
    for name, table in pools.items():
        try:
            pool_from_table(name, table, document.get("defaults", {}), path)
        except (ValueError, TypeError, NotImplementedError) as exc:
            message = str(exc).replace(f"{path} ", "")
            message = re.sub(rf"^\[pools\.{re.escape(name)}\]:?\s*", "", message)  # Problem names the pool
            problems.append(Problem(str(path), _line_of(text, name, message), name, message))
    return problems


def _line_of(text: str, pool: str, message: str) -> int:
    """The line of the key ``message`` names inside ``[pools.POOL...]``, else its header."""
    lines = text.splitlines()
    header = re.compile(rf"^\s*\[\s*pools\.{re.escape(pool)}(\.[^\]]+)?\s*\]")
    starts = [i for i, line in enumerate(lines) if header.match(line)]
    if not starts:
        return 1
    unknown = _UNKNOWN.search(message)
    if unknown is not None:  # the message goes on to list the known fields: only this one is at fault
        fields = [unknown.group(1)]
    else:
        fields = [m.group(1) for m in _FIELD.finditer(message)] + re.findall(r"'([a-z_]+)'", message)
        fields += [word for word in re.findall(r"[a-z_]+", message) if word in ("accelerator", "provider", "nodes", "image")]
    for start in starts:
        for index in range(start + 1, len(lines)):
            if lines[index].lstrip().startswith("["):
                break
            key = lines[index].split("=", 1)[0].strip()
            if key in fields:
                return index + 1
    return starts[0] + 1


def _provider(value: object, path: Path, name: str) -> Provider:
    """A provider name ("aws"), or a table ``{type = "runpod", ...fields}``."""
    from skyward.providers import names

    if isinstance(value, dict):
        fields = {k: v for k, v in value.items() if k != "type"}
        kind = value.get("type")
    else:
        fields, kind = {}, value
    if not isinstance(kind, str):
        raise ValueError(f'{path} [pools.{name}] provider={value!r}: use a name such as "aws", or a table with type = "..."')
    try:
        names.known(kind)
    except ValueError as exc:
        raise ValueError(f"{path} [pools.{name}] provider={value!r}: {exc}") from None
    try:
        return names.make(kind, **fields)
    except ValueError as exc:
        raise ValueError(f"{path} [pools.{name}] provider: {exc}") from None


def _accelerator(value: object) -> Accelerator:
    if not isinstance(value, str):
        example = 'a string such as "A100", "H100:8" or "A100-40GB"'
        raise ValueError(f"accelerator = {value!r} is not valid: use {example}")
    return accelerators.parse_accelerator(value)


def _options(table: dict[str, Any], where: str) -> Options:
    values = dict(table)
    if "worker" in values:
        values["worker"] = Worker(**values["worker"])
    if isinstance(values.get("logging"), dict):
        values["logging"] = LogConfig(**values["logging"])
    try:
        return Options(**values)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None
