"""Named pools from ``skyward.toml``: ``sky.Compute(name="train")``.

The file is ``$SKYWARD_CONFIG`` if set, else ``./skyward.toml``, else
``~/.skyward/skyward.toml``. Each ``[pools.NAME]`` table holds Spec fields; ``provider``
is a name ("local") or a table with ``type``; ``accelerator`` is a string such as
"A100", "A100-40GB" or "H100:8" (see ``parse_accelerator``); ``image`` and ``options``
(with an ``options.worker`` table) are tables.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from skyward.api import accelerators
from skyward.api.spec import Image, Nodes, Options, PipIndex, Spec, Worker
from skyward.observe.log_config import LogConfig


def config_path() -> Path | None:
    """The skyward.toml in effect, or None when there is none."""
    explicit = os.environ.get("SKYWARD_CONFIG")
    if explicit:
        return Path(explicit)
    for candidate in (Path.cwd() / "skyward.toml", Path.home() / ".skyward" / "skyward.toml"):
        if candidate.is_file():
            return candidate
    return None


def load_named_pool(name: str) -> tuple[Spec, Options]:
    """The Spec and Options of ``[pools.NAME]``; ValueError naming what is wrong."""
    path = config_path()
    if path is None or not path.is_file():
        raise ValueError(
            f"Compute(name={name!r}) needs a skyward.toml with a [pools.{name}] table; "
            "none was found in ./skyward.toml, ~/.skyward/skyward.toml or $SKYWARD_CONFIG"
        )
    with path.open("rb") as handle:
        try:
            document = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path} is not valid TOML: {exc}") from None
    pools = document.get("pools", {})
    if name not in pools:
        known = ", ".join(sorted(pools)) or "none"
        raise ValueError(f"{path} has no [pools.{name}] table (pools defined: {known})")
    table = dict(pools[name])
    options = _options(table.pop("options", {}), f"{path} [pools.{name}.options]")
    fields: dict[str, Any] = {
        "provider": _provider(table.pop("provider", "local"), path, name),
    }
    if "accelerator" in table:
        fields["accelerator"] = _accelerator(table.pop("accelerator"))
    if "nodes" in table:
        nodes = table.pop("nodes")
        fields["nodes"] = Nodes(**nodes) if isinstance(nodes, dict) else tuple(nodes) if isinstance(nodes, list) else nodes
    if "image" in table:
        image = dict(table.pop("image"))
        image["pip_indexes"] = tuple(PipIndex(**i) for i in image.get("pip_indexes", ()))
        fields["image"] = Image(**image)
    try:
        return Spec(**fields, **table), options
    except TypeError as exc:
        raise ValueError(f"{path} [pools.{name}]: {exc}") from None


def _provider(value: Any, path: Path, name: str) -> Any:
    """``"local"``, or a table ``{type = "local" | "ssh" | "ray", ...fields}``."""
    from skyward.providers.local import Local
    from skyward.providers.ray_cluster import Ray

    if isinstance(value, dict):
        fields = {k: v for k, v in value.items() if k != "type"}
        kind = value.get("type")
    else:
        fields, kind = {}, value
    if kind == "ssh":
        from skyward.providers.ssh.provider import SSH

        make: Any = SSH
    else:
        make = {"local": Local, "ray": Ray}.get(kind)
    if make is None:
        raise ValueError(
            f'{path} [pools.{name}] provider={value!r}: use "local", or a table with type = "local", "ssh" or "ray"'
        )
    try:
        return make(**fields)
    except TypeError as exc:
        raise ValueError(f"{path} [pools.{name}] provider: {exc}") from None


def _accelerator(value: Any) -> Any:
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
