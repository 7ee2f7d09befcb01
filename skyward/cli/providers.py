"""``sky providers list|check``: which providers there are, whether this machine has
each cloud's credentials, and whether its API answers with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from skyward.cli.output import emit_json, emit_object, table
from skyward.providers import names

if TYPE_CHECKING:
    from skyward.cli.launch_check import Report
    from skyward.providers.base import Offer


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
@click.option("--launch", is_flag=True, help="open one real machine on the cloud, run a task, tear it down (costs money)")
@click.option("--accelerator", default=None, help="with --launch: the cheapest machine with this GPU (e.g. L4) instead of a CPU one")
@click.option("--yes", is_flag=True, help="with --launch: do not ask before spending money")
def check(which: tuple[str, ...], as_json: bool, launch: bool, accelerator: str | None, yes: bool) -> None:
    """Check WHICH clouds (default: every cloud): credentials found, and the API answers a
    read-only call with them. Exits 1 when one is not ready. With --launch (one cloud),
    open its cheapest machine, run a task and tear it down, timing each phase."""
    try:
        chosen = [names.known(name) for name in which] or [names.KNOWN[name] for name in names.CLOUDS]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="WHICH") from None
    if launch:
        if len(which) != 1 or not chosen[0].cloud:
            raise click.BadParameter("--launch takes exactly one cloud, e.g. `sky providers check aws --launch`",
                                     param_hint="WHICH")
        _launch(chosen[0], accelerator, yes, as_json)
        return
    if accelerator is not None or yes:
        raise click.BadParameter("--accelerator and --yes go with --launch", param_hint="--launch")
    statuses = [_checked(known) for known in chosen]
    _show(statuses, as_json)
    if any(s.cloud and s.api != "ok" for s in statuses):
        raise SystemExit(1)


def _status(known: names.Known) -> Status:
    if not known.cloud:
        return Status(known.name, False, "not needed", "")
    found = "found" if names.credentials_found(known) else "missing"
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
    from skyward.providers.aws.provider import AWS
    from skyward.providers.cloud.provider import MachineCloud

    provider = names.make(name)
    if isinstance(provider, AWS):
        from skyward.providers.aws.session import client, explain

        try:
            client("ec2", provider.region).describe_availability_zones()
        except Exception as exc:
            raise explain(exc, "checking the API", provider.region) from exc
        return
    if not isinstance(provider, MachineCloud):
        raise TypeError(f"{name} is not a cloud whose API can be checked")
    provider.api().machines()


def _show(statuses: list[Status], as_json: bool) -> None:
    if as_json:
        emit_json(statuses)
        return
    table("providers", ["provider", "kind", "credentials", "from", "API"], [
        (s.provider, "cloud" if s.cloud else "your machines", s.credentials, s.where, s.api) for s in statuses
    ])


def _launch(known: names.Known, accelerator: str | None, yes: bool, as_json: bool) -> None:
    from skyward.cli import launch_check  # the pool machinery: only for --launch

    status = _status(known)
    if status.credentials == "missing":
        raise click.ClickException(f"no credentials for {known.name}: set {status.where}")

    def confirm(offer: Offer) -> bool:
        if yes:
            return True
        try:
            return click.confirm(
                f"Open one {offer.instance_type} on {known.name} at ${offer.hourly_price:.4f}/h "
                f"({offer.price_source} price; about ${launch_check.estimate(offer):.4f} for "
                f"{launch_check.ESTIMATE_MINUTES} minutes, more if the cloud bills a minimum period)?",
                default=False, err=True,
            )
        except click.Abort:  # no answer (no terminal, end of input): nothing is spent
            return False

    say = (lambda line: None) if as_json else (lambda line: click.echo(line, err=True))
    try:
        report = launch_check.run(names.make(known.name), accelerator, confirm, say)
    except KeyboardInterrupt:
        click.echo("interrupted: the pool was torn down", err=True)
        raise SystemExit(130) from None
    if as_json:
        emit_object(report)
    else:
        _show_launch(report)
    if not report.ok:
        raise SystemExit(1)


def _show_launch(report: Report) -> None:
    offer = report.offer
    if offer is not None:
        click.echo(f"machine: {offer.instance_type} ({offer.region or 'any region'}) at ${offer.hourly_price:.4f}/h, "
                   f"{offer.price_source} price")
    table(f"{report.cloud} launch check", ["phase", "seconds"], [(p.name, f"{p.seconds:.1f}") for p in report.phases])
    if report.node:
        click.echo(f"node: {report.node}")
    if report.cost is not None:
        click.echo(f"cost: ${report.cost:.4f}")
    if report.ok:
        click.echo("result: ok")
        return
    click.echo(f"result: FAILED: {report.error}")
    for call in report.failed_calls:
        status = call.status if call.status is not None else "not reached"
        click.echo(f"  {call.method} {call.path} -> {status}: {call.error}")
