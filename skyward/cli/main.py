"""``sky``: offers and prices, the providers and their credentials, the pools open on
this machine (``ls``, ``down``, ``logs``, ``events``), their nodes (``cp``, ``ssh``), kept pools
(``up``, ``attach``; ``api``: the pool daemon's HTTP API; ``dashboard``: its live web
dashboard), running a script (``run``, on a
kept pool with ``--pool``), skyward.toml (``config``), cleaning up what a lost pool left in
a cloud (``gc``), versions.

Every command that reports takes ``--json`` for scripts and agents (one JSON value on
stdout: an object for one thing, an array for many; ``sky logs --follow --json`` prints
one JSON string per line); ``ssh`` and ``attach`` are interactive and have none."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from skyward.providers.base import Provider
    from skyward.providers.orphans import Orphan

import click

T = TypeVar("T")
LAZY: dict[str, tuple[str, str, str]] = {
    "api": ("skyward.cli.http_api", "api", "Print the pool daemon's HTTP API URL and the file holding..."),
    "attach": ("skyward.cli.kept", "attach", "A Python shell with the kept pool NAME as pool (and..."),
    "config": ("skyward.cli.config", "config", "skyward.toml: where it is, its pools, problems in it."),
    "cp": ("skyward.cli.copy", "copy", "Copy SOURCE to DESTINATION, one of them NAME:PATH on the..."),
    "dashboard": ("skyward.cli.dashboard", "dashboard", "Open the live web dashboard of the kept pools (on NAME, when..."),
    "down": ("skyward.cli.pools", "down", "Close POOL (its name or id): a kept pool is torn down by the..."),
    "events": ("skyward.cli.pools", "events", "Print POOL's events (no task output) from its log file."),
    "logs": ("skyward.cli.pools", "logs", "Print POOL's event and task output lines from its log file,..."),
    "ls": ("skyward.cli.pools", "list_pools", "Pools open on this machine (kept pools included): provider,..."),
    "providers": ("skyward.cli.providers", "providers", "Providers: their credentials and APIs."),
    "run": ("skyward.cli.run", "run", "Run SCRIPT with ARGS, the log console, and a summary at the..."),
    "ssh": ("skyward.cli.shell", "ssh", "An interactive shell on node N of the open pool NAME, or..."),
    "up": ("skyward.cli.kept", "up", "Open the pool NAME and keep it (from skyward.toml's..."),
}
"""The commands whose modules are imported only when the command runs (or shows its own
help): name, module, attribute, and the line ``sky --help`` shows for it at its widest
(``SHORT_HELP`` characters of the command's own help: tests/unit/test_cli_help.py holds
them equal)."""
SHORT_HELP = 80 - 2 - 6 - max(map(len, LAZY))
"""click's widest help (80 columns, less a margin of 2) less the indent and the longest name."""


class _LazyGroup(click.Group):
    """A group that imports a ``LAZY`` command's module when the command is run, so a
    command loads only what it uses and ``sky --help`` loads none of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY and cmd_name not in self.commands:
            module, attribute, _ = LAZY[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            _without_markup(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str],
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.list_commands(ctx):
            for name in LAZY:  # a name no command has: click suggests the nearest of all of them
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = min(formatter.width - 6 - max(len(name) for name in names), SHORT_HELP)
        rows = [
            (name, (self.commands.get(name) or click.Command(name, help=LAZY[name][2])).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Skyward: run Python functions on pools of machines."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def version(as_json: bool) -> None:
    """Versions of skyward, Python and the engine."""
    import importlib.metadata

    from skyward.cli.output import emit_object, table

    versions = {
        "skyward": importlib.metadata.version("skyward"),
        "python": sys.version.split()[0],
        "ray": importlib.metadata.version("ray"),
        "cloudpickle": importlib.metadata.version("cloudpickle"),
    }
    if as_json:
        emit_object(versions)
        return
    table("versions", ["component", "version"], list(versions.items()))


@main.command()
@click.option("--accelerator", "-a", default=None, help='e.g. "A100", "H100:8", "A100-40GB"')
@click.option("--vcpus", type=float, default=None)
@click.option("--memory-gb", type=float, default=None)
@click.option("--architecture", type=click.Choice(["x86_64", "arm64"]), default=None)
@click.option("--allocation", default="spot-if-available", help='"spot", "on-demand", "cheapest", ...')
@click.option("--region", default=None)
@click.option("--max-hourly-cost", type=float, default=None, help="USD per node per hour")
@click.option("--provider", "providers", multiple=True, help="a cloud (repeatable; default: every cloud with credentials)")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def offers(
    accelerator: str | None, vcpus: float | None, memory_gb: float | None, architecture: str | None,
    allocation: str, region: str | None, max_hourly_cost: float | None, providers: tuple[str, ...], limit: int,
    as_json: bool,
) -> None:
    """Priced machines that satisfy a Spec, cheapest first. Without --provider it asks what
    sky.offers() asks, every cloud with credentials, and leaves out a cloud whose offers
    cannot be read, saying so on stderr; with no cloud credentials at all it lists the
    on-demand prices of the snapshot shipped with skyward, marked as not live."""
    from skyward.api.offers import offers as find_offers
    from skyward.cli.output import emit_json, table
    from skyward.core.accelerators import parse_accelerator
    from skyward.providers.names import clouds_with_credentials

    found_clouds = clouds_with_credentials() if not providers and region else []
    everywhere = not providers and (not region or not found_clouds)
    chosen = None if everywhere else _chosen(providers, (region,), found_clouds)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        found = _run(lambda: find_offers(
            chosen,
            accelerator=parse_accelerator(accelerator) if accelerator else None, vcpus=vcpus, memory_gb=memory_gb,
            architecture=architecture, allocation=_allocation(allocation), region=region,
            max_hourly_cost=max_hourly_cost,
        ))[:limit]
    for warning in said:
        click.echo(f"warning: {warning.message}", err=True)
    if as_json:
        emit_json(found)
        return
    rows = [
        (
            o.provider, o.region or "", o.instance_type,
            f"{o.accelerator_count:g}x {o.accelerator}" if o.accelerator else "-",
            f"{o.vcpus:g}", f"{o.memory_gb:g}", "spot" if o.spot else "on-demand",
            f"{o.hourly_price:.4f}{'' if o.price_source == 'live' else '*'}",
            f"{o.ondemand_price:.4f}" if o.ondemand_price is not None else "",
        )
        for o in found
    ]
    table("offers", ["provider", "region", "instance", "accelerator", "vCPUs", "GB", "market", "$/h", "$/h on-demand"], rows)
    stale = sorted({o.price_source for o in found if o.price_source != "live"})
    if stale:
        click.echo(f"* not live: from skyward's price {' and '.join(stale)} (no credentials, or the provider's "
                   "price API could not be read: the warning above says which)")


@main.command()
@click.option("--provider", "providers", multiple=True, help="a cloud (repeatable; default: every cloud with credentials)")
@click.option("--region", "regions", multiple=True, help="regions to look in (default: the provider's)")
@click.option("--yes", is_flag=True, help="delete without asking")
@click.option("--dry-run", is_flag=True, help="only list")
@click.option("--json", "as_json", is_flag=True, help="print JSON (implies --dry-run unless --yes)")
def gc(providers: tuple[str, ...], regions: tuple[str, ...], yes: bool, dry_run: bool, as_json: bool) -> None:
    """Find what skyward created that no live pool owns, with its cost so far; delete it.
    Without --provider it looks in every cloud with credentials; one that cannot be
    asked is named on stderr, the others are cleaned, and the command exits 1."""
    from skyward.cli.output import console, emit_json, table
    from skyward.providers.orphans import Collectable, collectable
    from skyward.providers.orphans import gc as collect

    chosen = _chosen(providers, regions or (None,))
    missed: list[str] = []

    def unreachable(provider: Collectable, exc: Exception) -> None:
        missed.append(provider.name)
        click.echo(f"warning: {provider.name} left out, its resources could not be listed: "
                   f"{type(exc).__name__}: {exc}", err=True)

    def confirm(found: list[Orphan]) -> bool:
        if yes:
            return True
        if dry_run or as_json or not sys.stdin.isatty():
            return False
        return click.confirm(f"Delete these {len(found)} resources?", default=False)

    found = _run(lambda: collect(
        collectable(chosen), delete=not dry_run, confirm=confirm, unreachable=None if providers else unreachable,
    ))
    if as_json:
        emit_json([{**_orphan(o), "cost_so_far": round(o.cost_so_far, 4)} for o in found])
    elif not found:
        console.print("nothing to clean up: every skyward resource " + (
            "in the clouds that answered belongs to a live pool" if missed else "belongs to a live pool"))
    else:
        table(
            "resources no live pool owns",
            ["provider", "region", "kind", "id", "pool", "$ so far", "why"],
            [(o.provider, o.region or "", o.kind, o.id, o.pool[:12], f"{o.cost_so_far:.4f}", o.reason) for o in found],
        )
    if missed:
        raise click.ClickException(
            f"not looked in: {', '.join(missed)}; what skyward left there may still bill: "
            f"`sky gc --provider {missed[0]}` once it answers"
        )


def _orphan(orphan: Orphan) -> dict[str, object]:
    import dataclasses

    return dataclasses.asdict(orphan)


def _require_credentials() -> list[Provider]:
    """Every cloud with credentials (a provider of each, default settings); a
    ClickException saying where credentials are looked for when there is none."""
    from skyward.providers.names import clouds_with_credentials

    found = clouds_with_credentials()
    if not found:
        raise click.ClickException("no cloud credentials were found; `sky providers list` says where each cloud looks")
    return found


def _chosen(names: tuple[str, ...], regions: tuple[str | None, ...], found: Sequence[Provider] = ()) -> list[Provider]:
    """The providers ``--provider`` names in each region, or every cloud with credentials
    (``found``, where the caller looked for them already)."""
    from skyward.providers import names as known

    if not names:
        found = list(found) or _require_credentials()
        if regions == (None,):
            return found
        names = tuple(provider.name for provider in found)
    try:
        return [known.with_region(name, region) for name in names for region in regions]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--provider") from None


def _allocation(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _run(action: Callable[[], T]) -> T:
    """Run ``action``; skyward's errors become one clear line and exit status 1."""
    from skyward.core.errors import SkywardError

    try:
        return action()
    except (SkywardError, ValueError, TypeError) as exc:
        raise click.ClickException(str(exc)) from None


def _without_markup(command: click.Command) -> None:
    """Drop the docstrings' reStructuredText literals (````x````: ``x``) from ``command``'s
    help, its options' and its subcommands', as a terminal shows them."""
    for text in ("help", "short_help"):
        value = getattr(command, text)
        if value:
            setattr(command, text, value.replace("``", ""))
    for param in command.params:
        if isinstance(param, click.Option) and param.help:
            param.help = param.help.replace("``", "")
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _without_markup(sub)


_without_markup(main)


if __name__ == "__main__":
    main()
