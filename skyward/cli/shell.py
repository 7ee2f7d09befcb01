"""``sky ssh NAME [--node N] [-- COMMAND...]``: a shell on a node of an open pool, or one
command run there.

A node on a remote host (SSH hosts, a cloud's machines) is reached with OpenSSH's
``ssh``, as the pool reached it: its user, port and key from the pool's record
(``registry.NodeRecord``), its host key checked against the pool's known_hosts (a
machine created for the pool) or skyward's (your own hosts; with ``SSH(known_hosts=...)``
the kept pool's own), never trusted on first use; a terminal gets a PTY. A kept pool's
node opens the shell in the node's working directory (where its tasks run). A node of a
local pool is a process on this machine: the shell runs here, in the node's working
directory and with its environment, which only a kept pool can tell (its node is asked,
by a task). As with ``ssh``, the words of COMMAND are joined by spaces and the node's
shell reads the line."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import click

from skyward.providers import registry
from skyward.providers.daemon_client import kept_definition


@click.command("ssh", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.option("--node", "node", type=int, default=0, show_default=True, help="the node's number in the pool")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def ssh(name: str, node: int, command: tuple[str, ...]) -> None:
    """An interactive shell on node N of the open pool NAME, or COMMAND run there (after
    ``--`` when it has options of its own); exits with the shell's or COMMAND's status."""
    try:
        record = registry.find(name)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if record is None:
        raise click.ClickException(f"no pool named {name!r} is open on this machine (sky ls lists them)")
    if not 0 <= node < len(record.nodes):
        raise click.BadParameter(f"{node}: pool {name} has nodes 0 to {len(record.nodes) - 1}", param_hint="--node")
    login = record.nodes[node].ssh
    definition = kept_definition(record.name) if record.keep_alive is not None else None
    workplace = _workplace(record.name, node) if definition is not None else None
    if login:
        own = getattr(definition[0].provider, "known_hosts", None) if definition else None
        sys.exit(_remote(record, node, workplace[0] if workplace else None, own, command))
    if workplace is None:
        raise click.ClickException(
            f"pool {name} runs its nodes as processes on this machine: only a kept pool's node can say where it "
            f"works (open it with keep_alive, or sky up {name})"
        )
    directory, environment = workplace
    shell = environment.get("SHELL") or os.environ.get("SHELL") or "/bin/sh"
    argv = [shell, "-c", " ".join(command)] if command else [shell, "-i"]
    sys.exit(subprocess.run(argv, cwd=directory, env=environment, check=False).returncode)


def _workplace(name: str, node: int) -> tuple[str, dict[str, str]]:
    """Node ``node``'s working directory and environment, asked of the kept pool ``name``."""
    from skyward.api.compute import Compute
    from skyward.core.function import function
    from skyward.node.files import workplace

    with Compute(name=name, console=False, logging=False) as pool:
        return pool.run(function(workplace)(), target=node)


def _remote(
    record: registry.LivePool, node: int, directory: str | None, own: object, command: tuple[str, ...]
) -> int:
    """Run OpenSSH to node ``node`` of ``record`` (a shell, or ``command``, in
    ``directory`` when known; ``own``: the kept pool's ``SSH.known_hosts``, when it has
    one); its exit status."""
    from skyward.providers.ssh.connection import KnownHosts

    client = shutil.which("ssh")
    if client is None:
        raise click.ClickException("sky ssh runs OpenSSH's ssh, which is not installed here (apt install openssh-client)")
    target = record.nodes[node]
    user_host, _, port = target.ssh.rpartition(":")
    known = [str(registry.known_hosts_of(record.pool_id)), KnownHosts().path]
    if isinstance(own, str):
        known.insert(0, os.path.expanduser(own))
    recorded = " ".join(f'"{path}"' for path in known if os.path.exists(path)) or os.devnull
    argv = [
        client, "-p", port, "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={recorded}",
        "-o", "GlobalKnownHostsFile=none", "-o", "LogLevel=ERROR",
    ]
    if target.key_path:
        argv += ["-i", target.key_path, "-o", "IdentitiesOnly=yes"]
    argv.append("-t" if sys.stdin.isatty() else "-T")
    enter = f"cd {shlex.quote(directory)} && " if directory else ""
    remote = enter + (" ".join(command) if command else 'exec "${SHELL:-/bin/sh}" -l')
    return subprocess.run([*argv, user_host, remote], check=False).returncode
