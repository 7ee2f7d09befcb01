"""``sky providers list|check``: which providers there are, whether this machine has
each cloud's credentials, and whether its API answers with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from skyward.cli.output import emit_json, table
from skyward.providers import names
from skyward.providers.cloud.credentials import find


@dataclass(frozen=True, slots=True)
class Status:
    """One provider as ``sky providers`` reports it."""

    provider: str
    cloud: bool
    credentials: str
    """"found", "missing" or "not needed"."""
    where: str
    api: str = ""
    """"ok", the error, or "" when not checked."""


def credentials_found(known: names.Known) -> bool:
    return all(find(known.name, source) is not None for source in known.credentials)


def clouds_with_credentials() -> list[Any]:
    """A provider (default settings) of every cloud whose credentials this machine has."""
    return [names.make(name) for name in names.CLOUDS if credentials_found(names.KNOWN[name])]


@click.group()
def providers() -> None:
    """Providers: their credentials and APIs."""


@providers.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_providers(as_json: bool) -> None:
    """Every provider, and whether its credentials are on this machine."""
    _show([_status(known) for known in names.KNOWN.values()], as_json)


@providers.command()
@click.argument("which", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def check(which: tuple[str, ...], as_json: bool) -> None:
    """Check WHICH clouds (default: every cloud): credentials found, and the API answers a
    read-only call with them. Exits 1 when one is not ready."""
    try:
        chosen = [names.known(name) for name in which] or [names.KNOWN[name] for name in names.CLOUDS]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="WHICH") from None
    statuses = [_checked(known) for known in chosen]
    _show(statuses, as_json)
    if any(s.cloud and s.api != "ok" for s in statuses):
        raise SystemExit(1)


def _status(known: names.Known) -> Status:
    if not known.cloud:
        return Status(known.name, False, "not needed", "")
    found = "found" if credentials_found(known) else "missing"
    return Status(known.name, True, found, "; ".join(source.describe() for source in known.credentials))


def _checked(known: names.Known) -> Status:
    status = _status(known)
    if not known.cloud:
        return status
    if status.credentials == "missing":
        return Status(status.provider, True, status.credentials, status.where, f"not checked: set {status.where}")
    try:
        _ping(known.name)
    except Exception as exc:  # reported, one line per provider
        return Status(status.provider, True, status.credentials, status.where, f"{type(exc).__name__}: {exc}")
    return Status(status.provider, True, status.credentials, status.where, "ok")


def _ping(name: str) -> None:
    """One cheap read-only call with the credentials."""
    provider = names.make(name)
    if name == "aws":
        from skyward.providers.aws.session import client, explain

        try:
            client("ec2", provider.region).describe_availability_zones()
        except Exception as exc:
            raise explain(exc, "checking the API", provider.region) from exc
        return
    provider.api().machines()


def _show(statuses: list[Status], as_json: bool) -> None:
    if as_json:
        emit_json(statuses)
        return
    table("providers", ["provider", "kind", "credentials", "from", "API"], [
        (s.provider, "cloud" if s.cloud else "your machines", s.credentials, s.where, s.api) for s in statuses
    ])
