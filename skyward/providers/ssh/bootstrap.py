"""Bootstrap one host over its SSH connection: ship what is missing (wheels, includes),
run the Image's script under a time limit enforced on the host itself, and report
phases, versions and the shell_vars values."""

from __future__ import annotations

import asyncio
import json
import posixpath
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from skyward.image.script import Artifacts
from skyward.providers.ssh.asyncssh_import import asyncssh
from skyward.providers.ssh.connection import RemoteFiles

REMOTE_CACHE = ".cache/skyward"
OUTPUT_TAIL = 60
KILL_GRACE = 5


class BootstrapError(RuntimeError):
    """A bootstrap step failed on a host; the message has the command and its output."""


@dataclass(frozen=True, slots=True)
class Shipment:
    """Local files to put in the node's cache (skipped when already there)."""

    wheels: tuple[Path, ...]
    includes: tuple[bytes, str] | None
    artifacts: Artifacts
    skyward_digest: str


@dataclass
class Bootstrapped:
    """What a host reported once ready."""

    env_dir: str
    versions: dict[str, str]
    shell_vars: dict[str, str]
    phases: list[tuple[str, float]] = field(default_factory=list)


async def ship(files: RemoteFiles, shipment: Shipment) -> None:
    """Upload the wheels and includes archive the host does not have yet, into the
    user's skyward cache there (``RemoteHosts.gather_facts`` made it)."""
    wheels_dir = f"{REMOTE_CACHE}/wheels"
    await files.makedirs(wheels_dir)
    present = await files.sizes(wheels_dir)
    for wheel in shipment.wheels:
        if present.get(wheel.name) != wheel.stat().st_size:
            await files.put(wheel, f"{wheels_dir}/{wheel.name}")
    if shipment.includes is not None and shipment.artifacts.includes_archive:
        target = f"{REMOTE_CACHE}/{shipment.artifacts.includes_archive}"
        if not await files.exists(target):
            await files.write(shipment.includes[0], target)



@dataclass(slots=True)
class _Phase:
    """The bootstrap phase running now and since when (monotonic seconds)."""

    name: str
    since: float

async def bootstrap(
    conn: asyncssh.SSHClientConnection, files: RemoteFiles, host: str, image_script: str, pool_dir: str,
    timeout: float, on_phase: Callable[[str, float], None], then: str,
    ready: Callable[[asyncssh.SSHClientProcess[str]], None],
) -> Bootstrapped:
    """Run the bootstrap script; BootstrapError (failing command + output) or TimeoutError.
    The host's own ``timeout`` stops the script (and everything it started) when
    ``timeout`` seconds pass, so nothing keeps installing after we gave up. The script
    reads nothing: its stdin is /dev/null. Once it succeeded the same command goes on as
    the shell command ``then`` (one command: each costs a host a login shell's start),
    whose process ``ready`` gets as soon as the script said it is ready, before this
    returns; what ``then`` prints follows on that process's stdout. The pool directory
    ``pool_dir`` is there already (``RemoteHosts.gather_facts`` made it)."""
    script_path = posixpath.join(pool_dir, "bootstrap.sh")
    await files.write(image_script.encode(), script_path)
    lines: list[str] = []
    phases: list[tuple[str, float]] = []
    state = _Phase("start", time.monotonic())
    result: dict[str, str] = {}

    def close_phase() -> None:
        if state.name != "start":
            duration = time.monotonic() - state.since
            phases.append((state.name, duration))
            on_phase(state.name, duration)

    command = f"timeout --kill-after={KILL_GRACE} {int(timeout)} bash {shlex.quote(script_path)} </dev/null && {then}"
    process = await conn.create_process(command, stderr=asyncssh.STDOUT)

    async def consume() -> bool:
        """Whether the script said it is ready (else its output ended first)."""
        while said := await process.stdout.readline():
            line = said.rstrip("\n")
            if line.startswith("::phase "):
                close_phase()
                state.name, state.since = line.split(" ", 1)[1], time.monotonic()
            elif line.startswith("::versions "):
                result["versions"] = line.split(" ", 1)[1]
            elif line.startswith("::ready "):
                close_phase()
                result["env"] = line.split(" ", 1)[1]
                return True
            else:
                lines.append(line)
        return False

    try:
        said_ready = await asyncio.wait_for(consume(), timeout + KILL_GRACE + 10)
        status = 0 if said_ready else await _exit_status(process)
    except asyncio.TimeoutError:
        process.close()
        status = 124
    if status in (124, 137):
        raise TimeoutError(
            f"bootstrap of {host} did not finish within {timeout:g}s (in phase {state.name!r}) and was "
            "stopped there; raise Image.bootstrap_timeout or Options.bootstrap_timeout. Last output:\n"
            + "\n".join(lines[-20:])
        )
    if status != 0 or "env" not in result:
        raise BootstrapError(_failure(host, status, lines))
    ready(process)
    raw = await files.read(posixpath.join(pool_dir, "shell_vars"))
    versions = json.loads(result.get("versions", "{}"))
    return Bootstrapped(result["env"], versions, _parse_vars(raw), phases)


async def _exit_status(process: asyncssh.SSHClientProcess[str]) -> int:
    """The exit status of ``process``, whose output ended; -1 when none comes in time."""
    try:
        completed = await asyncio.wait_for(process.wait(), KILL_GRACE + 10)
    except (asyncio.TimeoutError, asyncssh.Error, OSError):
        process.close()
        return -1
    return completed.exit_status if completed.exit_status is not None else -1


def _failure(host: str, status: int, lines: list[str]) -> str:
    failed = next((line for line in lines if line.startswith("::failed ")), None)
    command = next((line for line in lines if line.startswith("::command ")), None)
    output = [line for line in lines if not line.startswith("::")][-OUTPUT_TAIL:]
    shown = "\n".join(output) if output else "(the command printed nothing)"
    if failed is None:
        return f"bootstrap of {host} failed (exit {status}). Output:\n{shown}"
    _, phase, code = failed.split(" ", 2)
    what = command.split(" ", 1)[1] if command else "?"
    return f"bootstrap of {host} failed in phase {phase!r}: `{what}` exited with {code}. Output:\n{shown}"


def _parse_vars(raw: bytes) -> dict[str, str]:
    parts = raw.split(b"\0")
    return {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2)}
