"""``sky run script.py [args]``: run a script as ``python script.py`` would, with the log
console (plain timestamped lines, never the live panel), and a summary of its pools at
the end: nodes, tasks run and failed, errors, time and cost."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from dataclasses import asdict, dataclass, field

import click

from skyward.cli.output import console


@dataclass
class Summary:
    """What the script's pools did."""

    script: str
    exit_code: int = 0
    seconds: float = 0.0
    pools: int = 0
    nodes: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    errors: list[str] = field(default_factory=list)
    cost: float = 0.0

    def record(self, event: object) -> None:
        from skyward.observe.events import ClusterReady, CostFinal, Error, TaskCompleted

        if isinstance(event, ClusterReady):
            self.pools += 1
            self.nodes += event.nodes
        elif isinstance(event, TaskCompleted):
            self.tasks += 1
            self.failed_tasks += event.error is not None and not event.cancelled
        elif isinstance(event, Error):
            self.errors.append(event.message)
        elif isinstance(event, CostFinal):
            self.cost += event.total_cost


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True, help="the summary as JSON on stdout (the script's stdout goes to stderr)")
@click.option("--pool", "kept", default=None, help="the kept pool every sky.Compute(...) of the script adopts")
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(as_json: bool, kept: str | None, script: str, args: tuple[str, ...]) -> None:
    """Run SCRIPT with ARGS, the log console, and a summary at the end. ``sky run NAME
    SCRIPT [ARGS]`` (or ``--pool NAME``): on the kept pool NAME, which every
    ``sky.Compute(...)`` of the script adopts instead of opening its own."""
    import contextlib

    from skyward.api.compute import ADOPT_ENV
    from skyward.observe.bus import use_callback

    if kept is None and not os.path.isfile(script) and args and os.path.isfile(args[0]):
        kept, script, args = script, args[0], args[1:]  # sky run NAME script.py [args]
    if not os.path.isfile(script):
        raise click.BadParameter(f"{script!r} is not a file", param_hint="SCRIPT")
    if kept is not None:
        os.environ[ADOPT_ENV] = kept
    summary = Summary(script)
    os.environ["SKYWARD_PLAIN_CONSOLE"] = "1"
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    started = time.monotonic()
    stdout = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with stdout, use_callback(summary.record):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            summary.exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:  # the script's own failure: shown, then summarised
            import traceback

            traceback.print_exc()
            summary.exit_code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    summary.seconds = round(time.monotonic() - started, 3)
    summary.cost = round(summary.cost, 6)
    if as_json:
        click.echo(json.dumps(asdict(summary)))
    else:
        _show(summary)
    raise SystemExit(summary.exit_code)


def _show(summary: Summary) -> None:
    state = "finished" if summary.exit_code == 0 else f"failed (exit {summary.exit_code})"
    console.print(
        f"\n[bold]sky run[/bold] {summary.script}: {state} in {summary.seconds:.1f}s; {summary.pools} pool(s), "
        f"{summary.nodes} node(s), {summary.tasks} task(s) ({summary.failed_tasks} failed), ${summary.cost:.4f}",
        highlight=False,
    )
    for message in summary.errors[:10]:
        console.print(f"  error: {message}", highlight=False, markup=False)
