"""``sky cp SRC DST``: files and directories to and from the nodes of a kept pool, as
tasks on the pool itself (``node.files``), so it works the same on every provider: local
processes, SSH hosts, clouds. One side is ``NAME:PATH`` (the kept pool ``NAME``; a
relative ``PATH`` is the node's working directory's), the other a local path. To a
pool, ``--node N`` (default 0) or ``--all`` nodes; from a pool, node N, or with
``--all`` each node's copy in ``DST/node-N``. As ``cp -r``: a destination that is a
directory (or ends in ``/``) receives the source under its own name. Files cross in
chunks (``node.files.CHUNK``), so their size is not limited by memory."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from skyward.cli.output import console, emit_object
from skyward.node.files import CHUNK, PERMISSIONS, Entry, Found, found, kind, read_chunk, write_chunk

if TYPE_CHECKING:  # imported when a copy runs: `sky` answers at once (docs/cli.md)
    from skyward.api.pool import Pool

_REMOTE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*):(?P<path>.*)$")


@dataclass(frozen=True, slots=True)
class Remote:
    """``NAME:PATH``: a path on the nodes of the kept pool ``name``."""

    name: str
    path: str


@dataclass(frozen=True, slots=True)
class Copied:
    """What one ``sky cp`` did."""

    files: int
    bytes: int
    nodes: tuple[int, ...]
    seconds: float


@click.command("cp")
@click.argument("source")
@click.argument("destination")
@click.option("--node", "node", type=int, default=None, help="the node to copy to or from (default 0)")
@click.option("--all", "every_node", is_flag=True, help="every node: to each of them, or from each into DESTINATION/node-N")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def copy(source: str, destination: str, node: int | None, every_node: bool, as_json: bool) -> None:
    """Copy SOURCE to DESTINATION, one of them NAME:PATH on the kept pool NAME (the
    other a local path): files and directories, to node N (--node, default 0) or every
    node (--all); from every node into DESTINATION/node-N."""
    if node is not None and every_node:
        raise click.UsageError("--node and --all: give one of them (--all copies to or from every node)")
    src, dst = _location(source), _location(destination)
    if isinstance(src, Remote) == isinstance(dst, Remote):
        colon = next((text for text in (source, destination) if ":" in text and not text.startswith(("/", "."))), None)
        raise click.UsageError(
            f"one of SOURCE and DESTINATION is NAME:PATH on a kept pool, the other a local path; got {source!r} and "
            f"{destination!r}" + (f" (a local path with a colon: ./{colon})" if colon else "")
        )
    from skyward.api.compute import Compute
    from skyward.providers.daemon_client import kept_definition

    remote = src if isinstance(src, Remote) else dst
    assert isinstance(remote, Remote)
    if kept_definition(remote.name) is None:
        raise click.ClickException(f"no pool named {remote.name!r} is kept now (sky ls lists the kept pools; sky up {remote.name} keeps one)")
    started = time.monotonic()
    with Compute(name=remote.name, console=False, logging=False) as pool:
        nodes = _nodes(pool, node, every_node)
        if isinstance(dst, Remote):
            files, size = _upload(pool, Path(source), dst.path, nodes, every_node)
        else:
            assert isinstance(src, Remote)
            files, size = _download(pool, src, Path(destination), destination.endswith(("/", os.sep)), nodes, every_node)
    done = Copied(files, size, nodes, round(time.monotonic() - started, 3))
    if as_json:
        emit_object(done)
    else:
        where = f"node {nodes[0]}" if len(nodes) == 1 else f"{len(nodes)} nodes"
        console.print(f"copied {files} file{'s' * (files != 1)} ({_size(size)}) {'to' if isinstance(dst, Remote) else 'from'} "
                      f"{where} of {remote.name} in {done.seconds:.1f}s", highlight=False)


def _location(text: str) -> Remote | str:
    """``NAME:PATH`` (a kept pool's name never holds a slash) or a local path."""
    matched = _REMOTE.match(text)
    if matched is None or "/" in matched["name"]:
        return text
    return Remote(matched["name"], matched["path"] or ".")


def _nodes(pool: Pool, node: int | None, every_node: bool) -> tuple[int, ...]:
    count = pool.current_nodes()
    if every_node:
        return tuple(range(count))
    chosen = 0 if node is None else node
    if not 0 <= chosen < count:
        raise click.BadParameter(f"{chosen}: the pool has nodes 0 to {count - 1}", param_hint="--node")
    return (chosen,)


def _upload(pool: Pool, local: Path, path: str, nodes: tuple[int, ...], every_node: bool) -> tuple[int, int]:
    """Copy the local file or directory ``local`` to ``path`` on ``nodes``; files and bytes
    copied (per node)."""
    from skyward.core.function import function

    if not local.exists():
        raise click.ClickException(f"{local}: no such file or directory here")
    absolute, there = pool.run(function(kind)(path), target=nodes[0])
    root = os.path.join(absolute, local.name) if there == "directory" or path.endswith("/") else absolute
    files = [(local, _entry(local, ""))] if local.is_file() else [
        (file, _entry(file, str(file.relative_to(local)))) for file in sorted(local.rglob("*")) if file.is_file()
    ]
    for file, entry in files:
        target = os.path.join(root, entry.relative) if entry.relative else root
        with file.open("rb") as handle:
            for offset in range(0, max(entry.size, 1), CHUNK):
                data = handle.read(CHUNK)
                last = offset + CHUNK >= entry.size
                task = function(write_chunk)(target, offset, data, entry.mode, last)
                if every_node:
                    pool.broadcast(task)
                else:
                    pool.run(task, target=nodes[0])
    return len(files), sum(entry.size for _, entry in files)


def _entry(file: Path, relative: str) -> Entry:
    """``file`` (at ``relative`` under what is copied) as the copy sends it: one stat."""
    status = file.stat()
    return Entry(relative, status.st_size, status.st_mode & PERMISSIONS)


def _download(
    pool: Pool, remote: Remote, local: Path, into_directory: bool, nodes: tuple[int, ...], every_node: bool
) -> tuple[int, int]:
    """Copy ``remote`` from each of ``nodes`` to ``local`` (with ``every_node``, each
    node's into ``local/node-N``; with ``into_directory``, the DESTINATION ended in a
    slash: into ``local``); files and bytes copied in all."""
    from skyward.core.function import function

    files = size = 0
    for node in nodes:
        there: Found = pool.run(function(found)(remote.path), target=node)
        if there.kind == "missing":
            raise click.ClickException(f"{remote.name}:{remote.path}: no such file or directory on node {node} ({there.path})")
        base = local / f"node-{node}" if every_node else local
        into = every_node or base.is_dir() or into_directory
        root = base / os.path.basename(there.path) if into else base
        for entry in there.entries:
            source = os.path.join(there.path, entry.relative) if entry.relative else there.path
            target = root / entry.relative if entry.relative else root
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as handle:
                for offset in range(0, max(entry.size, 1), CHUNK):
                    handle.write(pool.run(function(read_chunk)(source, offset), target=node))
            target.chmod(entry.mode & PERMISSIONS)
            files, size = files + 1, size + entry.size
    return files, size


def _size(count: int) -> str:
    """``count`` bytes in B, KB, MB or GB (powers of 1000)."""
    if count < 1000:
        return f"{count} B"
    amount = count / 1000
    for unit in ("KB", "MB"):
        if amount < 1000:
            return f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} GB"
