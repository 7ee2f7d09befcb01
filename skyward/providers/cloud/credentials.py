"""Finding a cloud's credentials: the documented environment variables first, then the
documented file of the cloud's own command line tool. Values are never logged or shown;
errors name where they were looked for."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from skyward.providers.cloud.errors import CredentialsError


@dataclass(frozen=True, slots=True)
class Source:
    """Where one secret may be: environment variables (first set wins), then a file that
    holds only the secret (``key`` None) or a TOML, "key: value" or "key = value" file with
    that key (a dotted key, ``auth.token``, names one inside a TOML table)."""

    env: tuple[str, ...]
    file: str | None = None
    key: str | None = None

    def describe(self) -> str:
        where = " or ".join(f"${name}" for name in self.env)
        return where + (f" (or {self.file})" if self.file else "")


def find(cloud: str, source: Source) -> str | None:
    """The secret, or None when it is nowhere."""
    for name in source.env:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if source.file is None:
        return None
    path = Path(source.file).expanduser()
    try:
        text = path.read_text()
    except OSError:
        return None
    if source.key is None:
        return text.strip() or None
    return _from_file(text, source.key)


def require(cloud: str, sources: Sequence[Source]) -> tuple[str, ...]:
    """Every secret of ``sources``; CredentialsError naming the missing ones."""
    found = [find(cloud, source) for source in sources]
    missing = [source.describe() for source, value in zip(sources, found) if value is None]
    if missing:
        raise CredentialsError(
            f"{cloud} credentials were not found: set {'; '.join(missing)}. Create them in the {cloud} console"
        )
    return tuple(value for value in found if value is not None)


def given_or_found(cloud: str, given: str | None, source: Source) -> str:
    """``given``, else the secret of ``source``; CredentialsError when it is nowhere."""
    if given is not None:
        return given
    (found,) = require(cloud, [source])
    return found


def _from_file(text: str, key: str) -> str | None:
    try:
        table: object = tomllib.loads(text)
        for part in key.split("."):
            table = table.get(part) if isinstance(table, dict) else None
        value = table
    except tomllib.TOMLDecodeError:
        value = None
        for line in text.splitlines():  # YAML-ish "key: value", or "key = value" unquoted
            for separator in (":", "="):
                name, _, rest = line.partition(separator)
                if name.strip() == key:
                    value = rest.strip().strip("'\"")
                    break
    return str(value).strip() or None if value else None
