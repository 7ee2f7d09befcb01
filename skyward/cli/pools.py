"""``sky ls``, ``sky down``, ``sky logs``: the pools open on this machine (from the
registry each open pool writes, ``providers/registry.py``)."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from msgspec import to_builtins

from skyward.cli.output import console, emit_json, emit_object, table
from skyward.observe import log_export
from skyward.observe.log_names import EVENTS_LOGGER
from skyward.providers import daemon_client, registry

if TYPE_CHECKING:  # imported when `sky down` cleans a cloud: the other commands answer at once
    from skyward.providers.orphans import Orphan

FOLLOW_POLL = 0.3


@click.command("ls")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_pools(as_json: bool) -> None:
    """Pools open on this machine (kept pools included): provider, nodes, state, idle
    time, price per hour and cost so far."""
    kept = {state.pool_id: state for state in daemon_client.kept_pools()}  # first: a dead daemon's are adopted
    pools = registry.live_pools()
    now = time.time()
    if as_json:
        emit_json([{**to_builtins(p), "hourly_rate": p.hourly_rate, "cost_so_far": round(p.cost_so_far(now), 6),
                    "state": _state(p, kept), "idle_seconds": _idle(p, kept)} for p in pools])
        return
    if not pools:
        console.print("no pool is open on this machine")
        return
    table("open pools", LS_COLUMNS, [_row(p, kept, now) for p in pools])
    for pool in pools:
        for node in pool.nodes:
            console.print(f"  {pool.name} node {node.id} {node.address} {node.instance_type} "
                          f"{'spot' if node.spot else 'on-demand'} ${node.hourly_price:.4f}/h")


LS_COLUMNS = ("pool", "provider", "nodes", "state", "$/h", "$ so far", "up")
"""``sky ls``'s columns: a pool of a cloud region, kept and in use, fits 80 columns (its
id and every other field: ``--json``)."""


def _row(pool: registry.LivePool, kept: dict[str, daemon_client.KeptPoolState], now: float) -> tuple[str, ...]:
    """``pool``'s line in ``sky ls``."""
    state = _kept(pool, kept)
    if state is None:
        shown = f"open: pid {pool.pid}"
    elif state.holder:
        shown = f"kept: pid {state.holder}"
    else:
        shown = f"kept: idle {_age(state.idle)}"
    where = f"{pool.provider}/{pool.region}" if pool.region else pool.provider
    return (pool.name, where, str(len(pool.nodes)), shown, f"{pool.hourly_rate:.2f}",
            f"{pool.cost_so_far(now):.2f}", _age(now - pool.started))


def _state(pool: registry.LivePool, kept: dict[str, daemon_client.KeptPoolState]) -> str:
    """"open" (a script holds it), or for a kept pool "kept, in use by PID" or "kept, idle"."""
    state = _kept(pool, kept)
    if state is None:
        return "open"
    return f"kept, in use by {state.holder}" if state.holder else "kept, idle"


def _idle(pool: registry.LivePool, kept: dict[str, daemon_client.KeptPoolState]) -> float | None:
    """Seconds a kept pool has been idle (None: not kept, or in use)."""
    state = _kept(pool, kept)
    return state.idle if state is not None and not state.holder else None


def _kept(pool: registry.LivePool, kept: dict[str, daemon_client.KeptPoolState]) -> daemon_client.KeptPoolState | None:
    """What the pool daemon says of ``pool`` when it is a kept pool (else None)."""
    return None if pool.keep_alive is None else kept.get(pool.pool_id)


@click.command()
@click.argument("pool", required=False)
@click.option("--all", "everything", is_flag=True, help="end every kept pool, then stop the pool daemons")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="seconds to wait for the pool to close")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def down(pool: str | None, everything: bool, timeout: float, as_json: bool) -> None:
    """Close POOL (its name or id): a kept pool is torn down by the pool daemon, another
    is asked to shut down in order by the process that holds it (SIGTERM); if that
    process is gone, remove what it left in its cloud. Without POOL: stop this user's
    pool daemons now, which ends their kept pools too. ``--all``: the same, naming each
    kept pool it ended."""
    if pool is not None and everything:
        raise click.UsageError("give POOL or --all, not both")
    if pool is None:
        if everything:
            for name in daemon_client.end_pools(""):
                _done(as_json, "", name, "kept pool ended")
        _daemons_down(timeout, as_json)
        return
    record = _find(pool, live_only=False)
    if record is not None and record.keep_alive is not None and registry.alive(record):
        ended = daemon_client.end_pools(record.name, timeout)
        if not ended:
            raise click.ClickException(f"the pool daemon (pid {record.pid}) does not keep pool {record.name!r} now")
        _done(as_json, record.pool_id, record.name, "kept pool ended")
        return
    if record is not None and registry.alive(record):
        os.kill(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while registry.alive(record) and registry.find(record.pool_id) is not None:
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"pool {record.name or record.pool_id} (pid {record.pid}) did not close within {timeout:g}s; "
                    f"wait longer (--timeout) or stop the process (kill {record.pid})"
                )
            time.sleep(0.2)
        _done(as_json, record.pool_id, record.name, "closed by its process")
        return
    removed = _remove_leftovers(record.provider if record else None, record.pool_id if record else pool, record)
    if record is not None:
        registry.forget(record.pool_id)
    if record is None and not removed:
        raise click.ClickException(f"no pool {pool!r} is open on this machine, and no cloud holds anything of it")
    how = "its process was gone: removed what it left" if removed else "its process was gone and it left nothing"
    _done(as_json, record.pool_id if record else pool, record.name if record else "", how, removed)


def _daemons_down(timeout: float, as_json: bool) -> None:
    try:
        stopped = daemon_client.stop_all(timeout)
    except TimeoutError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(stopped)
    elif not stopped:
        console.print("no pool daemon is running")
    for daemon in stopped if not as_json else ():
        console.print(f"stopped the pool daemon (pid {daemon.pid})")


@click.command()
@click.argument("pool")
@click.option("--follow", "-f", is_flag=True, help="keep printing new lines until the pool closes")
@click.option("--lines", "-n", type=int, default=0, help="only the last N lines first (0: all)")
@click.option("--json", "as_json", is_flag=True, help="print each line as a JSON string (one array without --follow)")
@click.option("--export", "form", type=click.Choice(log_export.FORMATS), default=None,
              help="the log as JSON lines, a Markdown report or a Jupyter notebook (each node's output apart)")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True), default=None,
              help="with --export: the file to write (default: standard output)")
def logs(pool: str, follow: bool, lines: int, as_json: bool, form: str | None, output: str | None) -> None:
    """Print POOL's event and task output lines from its log file, or --export them."""
    if form is None:
        if output is not None:
            raise click.UsageError("--output is where --export writes: give --export jsonl, md or ipynb")
        _show(pool, follow, lines, lambda line: line, as_json)
        return
    if follow or as_json:
        raise click.UsageError(f"--export writes the log as it is now: leave out {'--follow' if follow else '--json'}")
    found = log_export.records(_log_of(pool, _find(pool, live_only=False)).read_text(encoding="utf-8", errors="replace").splitlines())
    text = log_export.export(found[-lines:] if lines > 0 else found, form, f"Pool {pool}: its log")
    if output is None:
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text, encoding="utf-8")


@click.command()
@click.argument("pool")
@click.option("--follow", "-f", is_flag=True, help="keep printing new events until the pool closes")
@click.option("--lines", "-n", type=int, default=0, help="only the last N events first (0: all)")
@click.option("--json", "as_json", is_flag=True, help="print each event as a JSON object: time, level, message")
def events(pool: str, follow: bool, lines: int, as_json: bool) -> None:
    """Print POOL's events (no task output) from its log file."""
    _show(pool, follow, lines, _event if as_json else lambda line: line if _event(line) else None, as_json)


def _event(line: str) -> dict[str, str] | None:
    """A log line of the pool's events as time, level and message (None: not an event)."""
    head, found, message = line.partition(f" {EVENTS_LOGGER}: ")
    if not found:
        return None
    time_text, _, level = head.rpartition(" ")
    return {"time": time_text, "level": level, "message": message}


def _show(pool: str, follow: bool, lines: int, keep: Callable[[str], object], as_json: bool) -> None:
    """Print what ``keep`` makes of each line of POOL's log (None: left out): all lines,
    or the last ``lines``, then with ``follow`` new ones while the pool is open."""
    record = _find(pool, live_only=False)
    path = _log_of(pool, record)

    def shown(text: str) -> list[object]:
        return [kept for kept in map(keep, text.splitlines()) if kept is not None]

    with path.open(encoding="utf-8") as handle:
        text = handle.read()
        ended, partial = (text, "") if text.endswith("\n") or not follow else text.rpartition("\n")[::2]
        first = shown(ended)  # ``partial``: a line the pool is still writing, printed once it ends
        first = first[-lines:] if lines > 0 else first
        if as_json and not follow:
            emit_json(first)
            return
        for item in first:
            _line(item, as_json)
        while follow and record is not None and _following(record):
            partial += handle.readline()
            if partial.endswith("\n"):
                for item in shown(partial):
                    _line(item, as_json)
                partial = ""
            else:
                time.sleep(FOLLOW_POLL)
        for item in shown(partial + handle.read()):  # what was written while it closed
            _line(item, as_json)


def _log_of(pool: str, record: registry.LivePool | None) -> Path:
    """The log file of the pool named (or with the id) ``pool``: ``record``'s when it is
    open, else a closed one's. ClickException when there is none."""
    path = Path(record.log_file) if record is not None and record.log_file else _closed_pool_log(pool)
    if path is None or not path.exists():
        raise click.ClickException(
            f"no log of pool {pool!r} here: no pool of that name or id was open on this machine with logging on"
        )
    return path


def _following(record: registry.LivePool) -> bool:
    """Whether ``sky logs -f`` keeps following ``record``'s log: while the process that
    holds the pool runs (a kept pool: while its daemon keeps it)."""
    if not registry.alive(record):
        return False
    return record.keep_alive is None or registry.is_live(record.pool_id)


def _closed_pool_log(reference: str) -> Path | None:
    """The log of a closed pool, in the default log directory (``logs/pools`` in
    skyward's home): the one whose id starts with ``reference``, else the newest of a
    pool named ``reference`` (the name the console printed; each log's first lines name
    its pool)."""
    from skyward.core.paths import in_home
    from skyward.observe.log_config import LogConfig

    directory = in_home(LogConfig().file).parent / "pools"
    logs = list(directory.glob("*.log")) if reference else []
    by_id = [path for path in logs if path.name.startswith(reference)]
    if len(by_id) == 1:
        return by_id[0]
    named = [path for path in logs if _names(path, reference)]
    return max(named, key=lambda path: path.stat().st_mtime) if named else None


def _names(log: Path, name: str) -> bool:
    """Whether ``log``'s first lines are those of the pool called ``name``."""
    try:
        with log.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f": pool {name}: " in head


def _line(item: object, as_json: bool) -> None:
    import json

    click.echo(json.dumps(item) if as_json else str(item))
    sys.stdout.flush()


def _find(reference: str, live_only: bool) -> registry.LivePool | None:
    try:
        return registry.find(reference, live_only=live_only)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _remove_leftovers(provider: str | None, pool_id: str, record: registry.LivePool | None) -> list[Orphan]:
    """Delete what the clouds still hold of a pool whose process is gone (every cloud
    with credentials when the pool's provider is not known)."""
    from skyward.providers import leftovers
    from skyward.providers.names import clouds_with_credentials

    if provider is not None:
        return leftovers.remove_leftovers(provider, record.region if record else None, pool_id)
    return [orphan for cloud in clouds_with_credentials() for orphan in leftovers.remove_from(cloud, pool_id)]


def _done(as_json: bool, pool: str, name: str, how: str, removed: Sequence[Orphan] = ()) -> None:
    if as_json:
        emit_object({"pool": pool, "name": name, "how": how, "removed": [dataclasses.asdict(o) for o in removed]})
        return
    console.print(f"pool {name or pool[:12]}: {how}")
    for orphan in removed:
        console.print(f"  removed {orphan.kind} {orphan.id} ({orphan.provider})")


def _age(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
