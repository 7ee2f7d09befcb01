"""``sky up NAME`` (open a kept pool and leave it kept) and ``sky attach NAME`` (a Python
shell with the kept pool as ``pool``); see docs/kept-pools.md. ``sky ls``, ``sky down``
and ``sky run --pool NAME`` cover the rest."""

from __future__ import annotations

import code
import subprocess
import sys
import time

from typing import TYPE_CHECKING

import click

from skyward.cli.output import console, emit_object
from skyward.providers.daemon_client import daemon_dir, kept_definition

if TYPE_CHECKING:  # imported when a pool opens: `sky` answers at once (docs/cli.md)
    from skyward.model.spec import Options, Spec

DEFAULT_KEEP_ALIVE = 600.0


@click.command()
@click.argument("name")
@click.option("--provider", default=None, help='a provider name ("local", "aws", ...); default: [pools.NAME] of skyward.toml, else local')
@click.option("--nodes", type=int, default=None, help="how many nodes (default: skyward.toml's, else 1)")
@click.option("--keep-alive", type=float, default=None, help=f"seconds kept after the last script left (default {DEFAULT_KEEP_ALIVE:g})")
@click.option("--detach", is_flag=True, help="return at once; the pool opens in the background (sky ls shows it when ready)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def up(name: str, provider: str | None, nodes: int | None, keep_alive: float | None, detach: bool, as_json: bool) -> None:
    """Open the pool NAME and keep it (from skyward.toml's [pools.NAME], or the flags);
    return once it is ready. A script's ``sky.Compute(name=NAME)``, ``sky run --pool
    NAME`` and ``sky attach NAME`` then use it."""
    if detach:
        log = daemon_dir() / f"up-{name}.log"
        arguments = [sys.executable, "-m", "skyward.cli.main", "up", name]
        for flag, value in (("--provider", provider), ("--nodes", nodes), ("--keep-alive", keep_alive)):
            if value is not None:
                arguments += [flag, str(value)]
        with open(log, "ab") as output:
            process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        _say(as_json, {"pool": name, "state": "opening", "pid": process.pid, "log": str(log)})
        return
    from skyward.api.pool import Pool

    spec, options = _definition(name, provider, nodes)
    options = options.with_(keep_alive=keep_alive or options.keep_alive or DEFAULT_KEEP_ALIVE, console=False, logging=False)
    started = time.monotonic()
    with Pool((spec,), options, name):
        pass
    _say(as_json, {"pool": name, "state": "kept", "nodes": spec.node_count.desired, "keep_alive": options.keep_alive,
                   "seconds": round(time.monotonic() - started, 3)})


def _definition(name: str, provider: str | None, nodes: int | None) -> tuple[Spec, Options]:
    """The pool ``name`` from the flags, else skyward.toml, else one local node."""
    from skyward.api.config_file import load_named_pool
    from skyward.model.spec import Options, Spec
    from skyward.providers import names

    if provider is None and nodes is None:
        try:
            return load_named_pool(name)
        except ValueError:
            pass
    try:
        made = names.make(provider or "local")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--provider") from None
    return Spec(provider=made, nodes=nodes or 1), Options()


@click.command()
@click.argument("name")
def attach(name: str) -> None:
    """A Python shell with the kept pool NAME as ``pool`` (and ``function``, the
    ``@sky.function`` decorator); leaving the shell leaves the pool kept. The shell is
    ``__main__``, as a script is: what it defines travels by value."""
    from skyward.api.compute import Compute
    from skyward.core.function import function

    if kept_definition(name) is None:
        raise click.ClickException(f"no pool named {name!r} is kept now (sky ls lists the kept pools; sky up {name} keeps one)")
    with Compute(name=name, console=False) as pool:
        code.interact(banner=f"kept pool {name}: `pool` and `function` (@sky.function) are bound; Ctrl-D leaves it kept",
                      local={"__name__": "__main__", "pool": pool, "function": function}, exitmsg="")


def _say(as_json: bool, result: dict[str, object]) -> None:
    if as_json:
        emit_object(result)
        return
    shown = ", ".join(f"{key} {value}" for key, value in result.items() if key != "pool")
    console.print(f"pool {result['pool']}: {shown}")

