"""Start and stop a skyward cluster on hosts reached over SSH.

One SSH connection per host carries everything: the host's facts, bootstrap, ``ray
start`` (head on node 0, the others joining it, each bound to the host's own address and
authenticated by a per-pool Ray token that only travels on stdin), a watchdog per node
(heartbeats on its stdin; it stops the pool's processes ``ttl`` seconds after the client
vanished), the head relay on node 0, and the SSH channel the client's transport reads and writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import posixpath
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from skyward.core import messages
from skyward.core.codec import read_marker
from skyward.engine.transports.relay import RelayEndpoint, SessionOver
from skyward.engine.transports.upload_lane import Credentials, UploadLane
from skyward.model.nodes import NodeHandle, SSHEndpoint
from skyward.providers import ray_ports, ray_start
from skyward.providers.ssh import bootstrap as runner
from skyward.providers.ssh.asyncssh_import import asyncssh
from skyward.providers.ssh.connection import RemoteFiles, SSHReach, connect, went_silent
from skyward.providers.ssh.versions import mismatches
from skyward.providers.ssh.watchdog import CLOSE, POOL_ENV, REJOIN, STOP
from skyward.providers.ssh.wheels import NodePlatform
from skyward.storage.errors import VolumeMountError
from skyward.storage.mount import MOUNT_TIMEOUT_S, UNMOUNT_TIMEOUT_S
from skyward.storage.pool_volumes import NodeVolume
from skyward.storage.pool_volumes import encode as encode_volumes

T = TypeVar("T")

log = logging.getLogger("skyward.remote")
# The pool's Ray token arrives as the first line of stdin: never on a command line.
_TOKEN_ENV = "read -r RAY_AUTH_TOKEN && export RAY_AUTH_TOKEN RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0"
HEARTBEAT = 2.0
QUIET_LINK_LIMIT = 120.0
"""The longest the client keeps a pool's SSH connections over a link that answers
nothing (a laptop's Wi-Fi gone for a minute): ``Spec.ttl`` up to this, never past the
hosts' own patience (``watchdog``: ``max(ttl, 3 * HEARTBEAT)`` of silence)."""
PROBE_AFTER = 10.0
"""Seconds node 0's relay may say nothing (it answers the client's heartbeat every
second) before the client tries new connections to the hosts (``revive``)."""
PROBE_TIMEOUT = 10.0
"""Seconds each of those new connections may take."""
HEAD_RESOURCE = "skyward-head"
"""A Ray resource only the head node has: the pool's collection hosts ask for a little
of it, so they live on the head, which the pool never removes."""
HEAD_CAPACITY = 1000.0
START_TIMEOUT = 120.0
WATCHDOG = "skyward.providers.ssh.watchdog"
"""The watchdog's module, which a node's Python runs with ``-P``: nothing of the login
directory's may shadow what it imports."""
STOP_TIMEOUT = 30.0
EXITED_WITHIN = 5.0
"""How long a watchdog that ended its output before watching gets to report its exit."""
FACTS_SCRIPT = r"""
set -u
echo "ip ${SSH_CONNECTION:-}"
echo "machine $(uname -m)"
echo "system $(uname -s | tr A-Z a-z)"
echo "cpus $(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || echo 0)"
echo "memory_kb $(awk '/MemTotal/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
echo "disk_kb $(df -Pk "$HOME" 2>/dev/null | awk 'NR==2 {print $4}')"
echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu /'
fi
reach() {
    case "$1" in
        file://*) [ -e "${1#file://}" ] ;;
        *) if command -v curl >/dev/null 2>&1; then curl -fsS -m 5 -o /dev/null "$1/" 2>/dev/null
           elif command -v python3 >/dev/null 2>&1; then python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1/" 2>/dev/null
           else return 1; fi ;;
    esac
}
for url in "$@"; do if reach "$url"; then echo "reach yes $url"; else echo "reach no $url"; fi; done
"""


class VersionMismatchError(RuntimeError):
    """Client and a node disagree on Python, cloudpickle or skyward."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a host reported about itself before bootstrap."""

    private_ip: str
    platform: NodePlatform
    vcpus: int
    memory_gb: float
    disk_gb: float
    unreachable: tuple[str, ...]
    """Package indexes the host could not reach."""
    gpus: tuple[tuple[str, float], ...] = ()
    """``(name, memory in GB)`` of each NVIDIA GPU ``nvidia-smi`` lists."""


@dataclass
class RemoteNode:
    """One host of the cluster and what runs there for the pool: ``index`` is its rank,
    ``serial`` is unique to this host in the pool (its directory and the Ray resource
    that pins its agent: a replacement takes the rank, never the serial)."""

    index: int
    serial: int
    handle: NodeHandle
    conn: asyncssh.SSHClientConnection
    files: RemoteFiles
    pool_dir: str
    facts: HostFacts | None = None
    ready: runner.Bootstrapped | None = None
    watchdog: asyncssh.SSHClientProcess[str] | None = None
    made_dir: bool = False
    """Whether this pool made ``pool_dir`` (``gather_facts``): only then may it remove it
    without its watchdog. A directory found there, or a pool taken over, is never removed."""

    @property
    def address(self) -> SSHEndpoint:
        assert self.handle.ssh is not None
        return self.handle.ssh

    @property
    def private_ip(self) -> str:
        return self.facts.private_ip if self.facts is not None else self.address.host


class RemoteHosts:
    """The hosts of one pool: connect, bootstrap, start Ray and the head relay, stop."""

    def __init__(self, pool_id: str, ttl: int, on_phase: Callable[[str, float, int | None], None]) -> None:
        self.pool_id = pool_id
        self.ttl = ttl
        self.token = secrets.token_hex(32)
        self.nodes: list[RemoteNode] = []
        self.gcs_port = 0
        self.volume_count = 0
        self.halt = False
        self.on_phase = on_phase
        self._heartbeat: asyncio.Task[None] | None = None
        self._serials = itertools.count()
        self._stopping: set[int] = set()
        self.resumes: SSHReach | None = None
        """How to reach the hosts again when the client's connection to one is closed or
        reset: the pool resumes (``relay``, ``watch``). None: it does not."""
        self.reach: SSHReach | None = None
        """How the hosts were reached (``connect``): a stop whose connection to a host
        closed reaches it again with it (``_stop_on``)."""
        self._reconnecting: dict[int, asyncio.Lock] = {}

    @property
    def quiet_link(self) -> float:
        """Seconds the client's connections outlive a link that answers nothing: as long as
        the hosts wait for a silent client (``ttl``), at most ``QUIET_LINK_LIMIT``."""
        return min(max(float(self.ttl), 3 * HEARTBEAT), QUIET_LINK_LIMIT)

    def pool_dir(self, serial: int) -> str:
        """Per-host pool directory (unique per host, short enough for Ray's sockets)."""
        return f"/tmp/skyward-{self.pool_id[:12]}-n{serial}"

    def node(self, index: int) -> RemoteNode | None:
        """The host at rank ``index``, if the pool has one."""
        return next((node for node in self.nodes if node.index == index), None)

    def node_of(self, handle: NodeHandle) -> RemoteNode | None:
        """The host of ``handle``, if the pool has it."""
        return next((node for node in self.nodes if node.handle is handle), None)

    async def connect(
        self, handles: Sequence[NodeHandle], reach: SSHReach, ranks: Sequence[int] | None = None,
        serials: Sequence[int] | None = None,
    ) -> list[RemoteNode]:
        """Connect to every host (at ``ranks``, default 0, 1, ...; with ``serials``, the
        hosts of a pool taken over, default new ones); ConnectionError naming the first
        that fails. Returns the new nodes."""
        started = time.monotonic()
        self.reach = reach
        endpoints = [handle.ssh for handle in handles]
        if any(endpoint is None for endpoint in endpoints):
            raise ValueError("every node of a remote pool needs an SSH endpoint")
        results = await asyncio.gather(
            *(
                connect(endpoint, reach.known, reach.timeout, reach.retry_interval, self.quiet_link)
                for endpoint in endpoints if endpoint is not None
            ),
            return_exceptions=True,
        )
        added = []
        given = iter(serials) if serials is not None else self._serials
        for index, handle, result in zip(ranks if ranks is not None else range(len(handles)), handles, results):
            serial = next(given)
            if isinstance(result, asyncssh.SSHClientConnection):
                assert handle.ssh is not None
                files = RemoteFiles(result, handle.ssh)
                added.append(RemoteNode(index, serial, handle, result, files, self.pool_dir(serial)))
        self.nodes.extend(added)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        self.on_phase("ssh", time.monotonic() - started, None if ranks is None else ranks[0])
        return added

    async def gather_facts(self, indexes: Sequence[str], timeout: float, nodes: Sequence[RemoteNode] | None = None) -> None:
        """Ask every host (or ``nodes``) for its address, platform, size and which
        ``indexes`` it reaches, making the user's skyward cache there (``ship`` puts the
        user's own code in it) and the pool's directory (new: it holds the shell_vars
        values, the pool's logs and notes, Ray's own world-writable directories) first,
        both private to the user (``RemoteFiles.make_private_dirs``), in the same command:
        each command costs a host a login shell's start. OSError naming the host and the
        directory when the cache is not the user's own, or the pool's directory is there
        already (another pool's, with this pool's id)."""

        async def one(node: RemoteNode) -> None:
            said = await node.files.make_private_dirs(
                [runner.REMOTE_CACHE], new=[node.pool_dir], then=FACTS_SCRIPT, args=indexes,
                timeout=timeout + 10 * len(indexes),
            )
            node.made_dir = True
            node.facts = _facts(said, node.address.host)

        await all_of(one(node) for node in (self.nodes if nodes is None else nodes))

    async def bootstrap(
        self, script_for: Callable[[RemoteNode], tuple[str, str]], shipments: dict[int, runner.Shipment], timeout: float,
        halt: bool, volumes: Sequence[NodeVolume] = (), nodes: Sequence[RemoteNode] | None = None,
    ) -> None:
        """Ship and bootstrap every host (or ``nodes``, whose directories
        ``gather_facts`` made); ``shipments`` by rank, ``script_for`` a host's bootstrap
        script and the Python it makes (``image.script.env_dir``). The same command then
        goes on as the host's watchdog (``watchdog``; ``watching`` waits for it): it
        mounts ``volumes`` (their keys go on its stdin as its first line, the moment the
        script is done, never on a command line), then stops the pool there and unmounts
        them once the client is gone (and, with ``halt``, shuts the machine down after)."""
        self.volume_count = len(volumes)
        self.halt = halt
        mode = ("halt" if halt else "stay") + (" mount" if volumes else "")

        async def one(node: RemoteNode) -> None:
            started = time.monotonic()
            await runner.ship(node.files, shipments[node.index])
            self.on_phase("ship", time.monotonic() - started, node.index)
            script, python = script_for(node)
            watchdog = f'exec "{python}" -u -P -m {WATCHDOG} {shlex.quote(node.pool_dir)} {self.ttl} {HEARTBEAT} {mode}'

            def watched_by(process: asyncssh.SSHClientProcess[str]) -> None:
                if volumes:
                    process.stdin.write(encode_volumes(volumes) + "\n")
                node.watchdog = process  # heartbeats may go to it from now on

            node.ready = await runner.bootstrap(
                node.conn, node.files, str(node.address), script, node.pool_dir, timeout,
                lambda phase, seconds: self.on_phase(phase, seconds, node.index), watchdog, watched_by,
            )

        await all_of(one(node) for node in (self.nodes if nodes is None else nodes))

    def check_versions(self, client: dict[str, str], nodes: Sequence[RemoteNode] | None = None) -> None:
        for node in self.nodes if nodes is None else nodes:
            assert node.ready is not None
            found = mismatches(client, node.ready.versions)
            if found:
                raise VersionMismatchError(
                    f"node {node.index} ({node.address}) does not match this client: {'; '.join(found)}. "
                    'Use Image(python="auto") so nodes get the client\'s Python, or run the client with '
                    "the nodes' version"
                )

    async def watching(self, nodes: Sequence[RemoteNode] | None = None) -> None:
        """Wait until every node's (or ``nodes``') watchdog, begun by ``bootstrap``,
        watches (it mounts the pool's volumes first), and heartbeat it. RuntimeError
        with its output when one exits first; VolumeMountError naming the node when a
        mount fails there."""

        async def one(node: RemoteNode) -> None:
            watchdog = node.watchdog
            assert watchdog is not None
            output: list[str] = []
            deadline = time.monotonic() + START_TIMEOUT + self.volume_count * MOUNT_TIMEOUT_S
            while True:
                line = await asyncio.wait_for(watchdog.stdout.readline(), deadline - time.monotonic())
                if not line:
                    if await _exited(watchdog):  # closing removes the pool's directory without it
                        node.watchdog = None
                    raise RuntimeError(f"the watchdog on {node.address} did not start:\n{''.join(output)}")
                match read_marker(line):
                    case messages.Watching():
                        return
                    case messages.VolumesMounted(seconds):
                        self.on_phase("volumes", seconds, node.index)
                    case messages.MountFailed(bucket, mount, cause):
                        if await _exited(watchdog):  # it stops the pool there and exits by itself
                            node.watchdog = None
                        raise _volume_error(node, bucket, mount, cause)
                    case _:
                        output.append(line)

        await all_of(one(node) for node in (self.nodes if nodes is None else nodes))
        if self._heartbeat is None:
            self._heartbeat = asyncio.ensure_future(self._beat())

    async def rejoin_watchdogs(self, timeout: float, nodes: Sequence[RemoteNode] | None = None) -> None:
        """Become the client of every node's (or ``nodes``') running watchdog
        (``watchdog.REJOIN``: the pool is taken over from a client that died) and heartbeat
        them. RuntimeError naming the node whose watchdog is gone; TimeoutError after
        ``timeout`` seconds."""

        async def one(node: RemoteNode) -> None:
            assert node.ready is not None
            python = posixpath.join(node.ready.env_dir, "venv/bin/python")
            command = f"exec {shlex.quote(python)} -u -P -m {WATCHDOG} {REJOIN}"
            watchdog = node.watchdog = await node.conn.create_process(command, stderr=asyncssh.STDOUT)
            watchdog.stdin.write(node.pool_dir + "\n")
            said: list[str] = []  # what the host's shell printed first (a login script's noise)
            async with asyncio.timeout(timeout):
                while not isinstance(read_marker(line := await watchdog.stdout.readline()), messages.Watching):
                    if not line:
                        raise RuntimeError(
                            f"the pool's watchdog on node {node.index} ({node.address}) is gone: {''.join(said).strip()}"
                        )
                    said.append(line)

        await all_of(one(node) for node in (self.nodes if nodes is None else nodes))
        if self._heartbeat is None:
            self._heartbeat = asyncio.ensure_future(self._beat())

    def watch(self, node: RemoteNode, lost: Callable[[RemoteNode, str], None]) -> None:
        """Call ``lost(node, why)`` when the host's watchdog stream ends while the pool
        did not ask it to stop: the host (or the way to it) is gone. When the pool
        resumes (``resumes``) and the stream ended because the client's connection was
        closed or reset, the host is reached again first (``reconnect``, for
        ``resume_within`` seconds at most), and only a host that is not is lost."""

        async def follow() -> None:
            while True:
                watched = node.watchdog
                try:
                    if watched is not None:
                        await watched.wait_closed()
                except Exception:
                    pass
                if node.serial in self._stopping:
                    return
                if node.watchdog is not watched:
                    continue  # rejoined over a new connection (``revive``): follow that one
                if not await self._reached_again(node):
                    break
            if node.serial not in self._stopping:  # not lost: the pool stops it (``_stop_on``)
                lost(node, f"the connection to {node.address} closed (its machine or sshd is gone)")

        asyncio.ensure_future(follow())

    async def _reached_again(self, node: RemoteNode) -> bool:
        """Whether ``node``, whose connection was closed or reset, was reached again and
        its watchdog rejoined within ``resume_within`` seconds (tried every second)."""
        reach = self.resumes
        if reach is None or not node.conn.is_closed() or went_silent(node.conn):
            return False
        deadline = time.monotonic() + self.resume_within
        while node.serial not in self._stopping and (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(self.reconnect(node, reach), max(1.0, left))
                return True
            except Exception:  # noqa: BLE001 - not back yet
                await asyncio.sleep(1.0)
        return False

    async def _beat(self) -> None:
        while True:
            for node in self.nodes:
                if node.watchdog is not None:
                    try:
                        node.watchdog.stdin.write("beat\n")
                    except Exception:
                        pass
            await asyncio.sleep(HEARTBEAT)

    async def start_ray(
        self, resources: Callable[[RemoteNode], dict[str, float]], env: dict[str, str],
        head_up: Callable[[], Awaitable[T]],
    ) -> T:
        """Start Ray's head on node 0 and join every other host to it; returns what
        ``head_up()`` gave, which runs once the head's GCS answers (``gcs_port`` is set),
        beside the other hosts' joining. No port is named in advance (``ray_ports``): the
        head's GCS binds a port of its own, read back from its temp dir. The other hosts'
        starts begin with the head's, boot Python and import Ray meanwhile, and get the
        head's address on stdin once it is known; they are ended if the head's start fails.
        The first failure of a joining host or of ``head_up`` is raised as soon as it comes
        (a host's first when both are there), the rest cancelled and their starts ended."""
        started = time.monotonic()
        head = self.nodes[0]
        # No Ray Client server (the minimal ray package has none), no autoscaler monitor
        # (`--no-monitor`: skyward resizes pools itself) and, on every host, no log monitor
        # (agents capture a task's output themselves): two Python daemons fewer to start;
        # `_ray_start` leaves out the API server too.
        head_args = ["--head", *ray_ports.HEAD, "--include-dashboard=false", "--no-monitor"]
        head_resources = {**resources(head), HEAD_RESOURCE: HEAD_CAPACITY}
        joiners = self.nodes[1:]
        begun = await asyncio.gather(
            self._ray_start(head, head_args, head_resources, env),
            *(self._ray_start(node, [ray_start.ADDRESS_ON_STDIN, *ray_ports.SELF_BOUND], resources(node), env)
              for node in joiners),
            return_exceptions=True,
        )
        processes = [outcome for outcome in begun if not isinstance(outcome, BaseException)]
        try:
            failed = next((outcome for outcome in begun if isinstance(outcome, BaseException)), None)
            if failed is not None:
                raise failed
            head_start, *joining = processes
            await self._ray_started(head, head_start, "")
            self.gcs_port = await self._gcs_port(head)
            address = f"{head.private_ip}:{self.gcs_port}\n"
            head_ready = asyncio.ensure_future(head_up())
            await first_failure([
                *(self._ray_started(node, process, address) for node, process in zip(joiners, joining, strict=True)),
                head_ready,
            ])
            done = head_ready.result()
        finally:  # a start the head's failure left waiting for its address ends at its stdin's end
            for process in processes:
                process.stdin.write_eof()
                process.close()
        self.on_phase("ray", time.monotonic() - started, None)
        return done

    async def join_ray(self, node: RemoteNode, resources: dict[str, float], env: dict[str, str]) -> None:
        """Start Ray on ``node``, joining the head's cluster."""
        started = time.monotonic()
        joining = [f"--address={self.nodes[0].private_ip}:{self.gcs_port}", *ray_ports.SELF_BOUND]
        await self._ray_started(node, await self._ray_start(node, joining, resources, env), "")
        self.on_phase("ray", time.monotonic() - started, node.index)

    async def _gcs_port(self, head: RemoteNode) -> int:
        """The port the head's GCS bound, as ``ray start`` wrote it down in its temp dir."""
        path = posixpath.join(head.pool_dir, "ray", ray_ports.ADDRESS_FILE)
        try:
            written = await asyncio.wait_for(head.files.read(path), START_TIMEOUT)
            return ray_ports.port_of(written.decode(errors="replace"))
        except (OSError, asyncssh.SFTPError, ValueError) as error:  # TimeoutError is an OSError
            raise RuntimeError(
                f"`ray start` on node 0 ({head.address}) left no GCS address in {path}: {type(error).__name__}: {error}"
            ) from None

    async def _ray_start(
        self, node: RemoteNode, args: list[str], resources: dict[str, float], env: dict[str, str]
    ) -> asyncssh.SSHClientProcess[str]:
        """``ray start ARGS`` begun on ``node``, the pool's Ray token sent on its stdin."""
        assert node.ready is not None
        python = posixpath.join(node.ready.env_dir, "venv/bin/python")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**env, POOL_ENV: node.pool_dir}.items())
        command = (  # `ray start`, lean (providers/ray_start.py): no API server, no one-second wait
            f"{_TOKEN_ENV} {exports} && exec {shlex.quote(python)} -m skyward.providers.ray_start start "
            f"{' '.join(shlex.quote(a) for a in args)} "
            f"--node-ip-address={node.private_ip} --temp-dir={shlex.quote(node.pool_dir + '/ray')} "
            f"--resources={shlex.quote(json.dumps(resources))} --disable-usage-stats --include-log-monitor=false "
            "--log-style=record --log-color=false"
        )
        process = await asyncio.wait_for(node.conn.create_process(command), START_TIMEOUT)
        process.stdin.write(self.token + "\n")
        return process

    async def _ray_started(self, node: RemoteNode, process: asyncssh.SSHClientProcess[str], rest: str) -> None:
        """Wait for ``node``'s ``ray start`` once ``rest`` of its stdin and then its end are
        sent; RuntimeError with its output if it failed or took ``START_TIMEOUT``."""
        if rest:
            with contextlib.suppress(OSError):  # it ended already: its output says why
                process.stdin.write(rest)
        process.stdin.write_eof()
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), START_TIMEOUT)
        except TimeoutError:
            stdout, stderr = process.collect_output()
            process.close()
            timed_out = True
        if timed_out or process.exit_status != 0:
            output = (str(stdout) + str(stderr)).replace(self.token, "***")[-3000:]
            ended = f"took over {START_TIMEOUT:g}s" if timed_out else "failed"
            raise RuntimeError(f"`ray start` {ended} on node {node.index} ({node.address}):\n{output}")

    async def boot_relay(self) -> asyncssh.SSHClientProcess[bytes]:
        """The head relay begun on node 0, the pool's Ray token sent: it imports what it
        runs while Ray starts, then waits for its config (``configure_relay``; it exits if
        its stdin ends first)."""
        head = self.nodes[0]
        assert head.ready is not None
        python = posixpath.join(head.ready.env_dir, "venv/bin/python")
        command = (
            f"cd {shlex.quote(head.pool_dir)} && {_TOKEN_ENV} {POOL_ENV}={shlex.quote(head.pool_dir)} && exec {shlex.quote(python)} -u -m "
            f"skyward.providers.ssh.head_relay {shlex.quote(head.pool_dir)}"
        )
        process = await head.conn.create_process(command, encoding=None, stderr=asyncssh.STDOUT)
        process.stdin.write(self.token.encode() + b"\n")
        return process

    @staticmethod
    def configure_relay(process: asyncssh.SSHClientProcess[bytes], config: bytes) -> None:
        """Send the booted head relay ``process`` its encoded config: it joins Ray and
        starts the agents (``relay_started`` waits for them). Agents of hosts still
        joining Ray start once those hosts have joined."""
        with contextlib.suppress(OSError):  # it ended already: its output says why
            process.stdin.write(len(config).to_bytes(8, "big") + config)

    async def relay_started(
        self, process: asyncssh.SSHClientProcess[bytes], timeout: float
    ) -> tuple[int, int | None, float]:
        """Wait for the configured head relay ``process`` to listen; returns the port it
        listens on (node 0's loopback), its upload lane's port (None: it has none) and how
        long its agents took to start.
        RuntimeError with its output if it exited first, TimeoutError with it if it did not
        listen within ``timeout`` seconds (its own waits end sooner, and it says why)."""
        lines: list[str] = []
        agents = 0.0
        uploads: int | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    raw = await process.stdout.readline()
                    if not raw:
                        raise RuntimeError("the head relay on node 0 exited while starting:\n" + "\n".join(lines[-40:]))
                    line = raw.decode(errors="replace").rstrip()
                    match read_marker(line):
                        case messages.AgentsStarted(seconds):
                            agents = seconds
                        case messages.UploadListening(port):
                            uploads = port
                        case messages.RelayListening(port):
                            remote_port = port
                            break
                        case messages.RelayFailed(error):
                            lines.append(error)
                        case _:
                            lines.append(line)
        except TimeoutError:
            said = "\n".join(lines[-40:])
            raise TimeoutError(f"the head relay on node 0 did not listen within {timeout:g}s:\n{said}") from None
        asyncio.ensure_future(self._stream_logs(process))
        return remote_port, uploads, agents

    async def open_relay(self, port: int) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """A stream to the relay on node 0's loopback ``port``: a channel of the pool's SSH
        connection (on this loop), so nothing listens on the client's machine. When the
        pool resumes (``resumes``), a connection to node 0 that was closed or reset is
        opened again first (``reconnect``); one given up on after ``quiet_link`` seconds
        of silence is not (``SessionOver``: the hosts stop the pool then)."""
        head = self.nodes[0]
        if self.resumes is not None and head.conn.is_closed():
            if went_silent(head.conn):
                raise SessionOver("node 0 was silent for as long as the pool's hosts wait for this client")
            await self.reconnect(head, self.resumes)
        return await head.conn.open_connection("127.0.0.1", port, encoding=None)

    async def reconnect(self, node: RemoteNode, reach: SSHReach, timeout: float | None = None) -> None:
        """A new SSH connection to ``node`` in place of its closed (or silent) one, its
        watchdog rejoined over it (``rejoin_watchdogs``: the countdown it started when the
        old connection ended stops), then the old one closed. Nothing when another caller
        replaced the connection meanwhile. Raises why not (unreachable within ``timeout``
        seconds, default ``reach.timeout``; the watchdog gone)."""
        old = node.conn
        async with self._reconnecting.setdefault(node.serial, asyncio.Lock()):
            if node.conn is not old:
                return
            conn = await connect(node.address, reach.known, timeout or reach.timeout, reach.retry_interval,
                                 self.quiet_link)
            node.conn, node.files = conn, RemoteFiles(conn, node.address)
            try:
                await self.rejoin_watchdogs(timeout or reach.timeout, [node])
            finally:
                old.close()

    async def revive(self) -> None:
        """Node 0 has said nothing for a while (``relay``): give it a new connection if
        one can be made now (``reconnect``, within ``PROBE_TIMEOUT``), the old one closed,
        and then every other host too (one that cannot be reached keeps its connection).
        A connection that is silent because the client's address changed never answers
        again; a new one from the new address does. ConnectionError when node 0 could not
        be reached either (its old connection may still come back)."""
        reach = self.resumes
        if reach is None or not self.nodes:
            return
        head, *others = self.nodes
        try:
            await self.reconnect(head, reach, PROBE_TIMEOUT)
        except Exception as exc:
            raise ConnectionError(f"node 0 ({head.address}) could not be reached again: {exc}") from None
        await asyncio.gather(*(self.reconnect(node, reach, PROBE_TIMEOUT) for node in others), return_exceptions=True)

    def relay(self, port: int, secret: bytes, compress: bool, upload: UploadLane | None = None) -> RelayEndpoint:
        """The head relay on node 0's loopback ``port``, as ``open_relay`` reaches it, with
        its ``upload`` lane where it has one (``upload_lane``). When
        the pool resumes (``resumes``) the client resumes its session when its stream
        breaks, within ``resume_within`` seconds (the relay waits as long:
        ``RelayConfig.resume_within``), over a new connection to node 0 where the old one
        was closed or reset; and when the relay has said nothing for ``PROBE_AFTER``
        seconds it gives every host a new connection that works (``revive``)."""
        quiet = (
            f"node 0 answered nothing for {self.quiet_link:g} s (the client waits that long for a link "
            f"that came back; the pool's hosts stop its work {self.ttl} s after they last heard from "
            "this client, Spec.ttl)"
        )
        resumes = self.resumes is not None and self.resume_within > 0
        return RelayEndpoint(
            lambda: self.open_relay(port), f"node 0's port {port}", secret, compress, quiet,
            self.resume_within if resumes else 0.0, self.revive if resumes else None, PROBE_AFTER, upload,
        )

    def upload_lane(self, port: int | None, credentials: Credentials | None, secret: bytes) -> UploadLane | None:
        """The client's end of the head relay's upload lane on node 0's ``port``, where it
        listens, connecting in the background to the address this client reaches node 0 at."""
        if port is None or credentials is None:
            return None
        lane = UploadLane(self.nodes[0].address.host, port, credentials.certificate, secret)
        lane.start()
        return lane

    @property
    def resume_within(self) -> float:
        """Seconds a session whose stream broke is kept for its client to resume: as long
        as the client waits for a link that answers nothing (``quiet_link``), never past
        ``Spec.ttl`` (the hosts stop the pool then; 0: no resuming)."""
        return min(float(self.ttl), self.quiet_link)

    async def _stream_logs(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        try:
            async for raw in process.stdout:
                log.debug("head relay: %s", raw.decode(errors="replace").rstrip())
        except Exception:
            pass

    async def stop(self) -> None:
        """Stop every process of the pool on every host and remove its files."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        nodes = list(self.nodes)  # each closed after, whatever leaves the pool meanwhile
        try:
            results = await asyncio.gather(*(self._stop_on(node, True) for node in nodes), return_exceptions=True)
            failures = [result for result in results if isinstance(result, VolumeMountError)]
            if failures:
                raise failures[0]
        finally:
            for node in nodes:
                node.files.close()
                node.conn.close()
            await asyncio.gather(*(n.conn.wait_closed() for n in nodes), return_exceptions=True)

    async def disconnect(self) -> None:
        """Let go of every host without stopping the pool there: its watchdogs count
        ``ttl`` down from now, as when a client vanishes."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        for node in self.nodes:
            node.files.close()
            node.conn.close()
        await asyncio.gather(*(node.conn.wait_closed() for node in self.nodes), return_exceptions=True)

    async def stop_node(self, node: RemoteNode) -> None:
        """Stop the pool on ``node`` alone (it leaves the pool) and let go of it; a host
        that is gone already is fine."""
        if node in self.nodes:
            self.nodes.remove(node)
        try:
            await self._stop_on(node)
        except VolumeMountError:
            raise
        except Exception as exc:  # the host is gone: nothing left to stop there
            log.debug("stopping node %s: %s", node.index, exc)
        finally:
            node.files.close()
            node.conn.close()

    async def _stop_on(self, node: RemoteNode, closing: bool = False) -> None:
        """Stop the pool on ``node``: its watchdog is told to (it stops every process of
        the pool there, removes its files, unmounts its volumes) and waited for: that the
        pool closes (``closing``: every host is told at once), or else that this host
        leaves a pool that goes on. With ``closing``, when the connection to the host closed (reset,
        dropped) the host is reached again and its watchdog rejoined (``reconnect``) and
        told over the new one. A host that is not is logged and left to its watchdog,
        which stops the pool ``ttl`` seconds after it last heard from this client. A node
        whose open failed before its watchdog started has its directory removed only if
        this pool made it (``made_dir``); so does one whose watchdog exited before it
        watched (it did not start, or stopped the pool there after a failed mount).
        VolumeMountError for a volume left mounted."""
        self._stopping.add(node.serial)
        if node.watchdog is None:  # no watchdog, and nothing of the pool runs there yet
            if node.made_dir:
                await node.conn.run(f"rm -rf {shlex.quote(node.pool_dir)}", check=False, timeout=STOP_TIMEOUT)
            return
        try:
            done = await self._told_to_stop(node, closing)
        except Exception as exc:  # noqa: BLE001 - logged; the watchdog's countdown stops the pool
            if isinstance(exc, TimeoutError) or not closing or self.reach is None:
                log.warning("watchdog on %s: %s", node.address, exc)
                return
            try:
                await self._reached_again_to_stop(node, self.reach)
                done = await self._told_to_stop(node, closing)
            except Exception as again:  # noqa: BLE001 - logged, as above
                log.warning("watchdog on %s: %s; reaching it again: %s", node.address, exc, again)
                return
        for line in str(done.stdout or "").splitlines():
            if isinstance(failed := read_marker(line), messages.UnmountFailed):
                raise _volume_error(node, failed.bucket, failed.mount, failed.cause)

    async def _reached_again_to_stop(self, node: RemoteNode, reach: SSHReach) -> None:
        """``node`` on a new connection, its watchdog rejoined (``reconnect``), trying
        every second for ``STOP_TIMEOUT`` while the host cannot be reached; raises why
        not (unreachable all that time, the watchdog gone)."""
        deadline = time.monotonic() + STOP_TIMEOUT
        while True:
            try:
                await self.reconnect(node, reach, PROBE_TIMEOUT)
                return
            except ConnectionError:
                if time.monotonic() + 1.0 > deadline:
                    raise
            await asyncio.sleep(1.0)

    async def _told_to_stop(self, node: RemoteNode, closing: bool) -> asyncssh.SSHCompletedProcess:
        """``node``'s watchdog told that the pool closes (``closing``) or that the host
        leaves it, once it has stopped the pool there (its output)."""
        assert node.watchdog is not None
        node.watchdog.stdin.write(f"{CLOSE if closing else STOP}\n")
        return await asyncio.wait_for(node.watchdog.wait(), STOP_TIMEOUT + self.volume_count * UNMOUNT_TIMEOUT_S)


async def _exited(watchdog: asyncssh.SSHClientProcess[str]) -> bool:
    """Whether ``watchdog`` exited, waiting ``EXITED_WITHIN`` seconds for its exit status;
    False when none came (its channel or the connection closed with it still running)."""
    try:
        done = await asyncio.wait_for(watchdog.wait(), EXITED_WITHIN)
    except (TimeoutError, asyncssh.Error, OSError):
        return False
    return done.exit_status is not None or done.exit_signal is not None


def _volume_error(node: RemoteNode, bucket: str, mount: str, cause: str) -> VolumeMountError:
    """The mount or unmount failure a watchdog reported (``MountFailed``,
    ``UnmountFailed``), naming the node."""
    return VolumeMountError(bucket, mount, f"on node {node.index} ({node.address}): {cause}")


def _facts(output: str, host: str) -> HostFacts:
    values: dict[str, str] = {}
    unreachable = []
    gpus = []
    for line in output.splitlines():
        key, _, rest = line.partition(" ")
        if key == "gpu":
            name, _, memory = rest.rpartition(",")
            gpus.append((name.strip(), _int(memory.strip()) / 1024))
        elif key == "reach":
            verdict, _, url = rest.partition(" ")
            if verdict != "yes":
                unreachable.append(url)
        else:
            values[key] = rest.strip()
    connection = values.get("ip", "").split()
    system = values.get("system", "linux")
    platform = NodePlatform(system, values.get("machine", ""), "", values.get("glibc", ""))
    return HostFacts(
        private_ip=connection[2] if len(connection) >= 3 else host,
        platform=platform,
        vcpus=_int(values.get("cpus")),
        memory_gb=_int(values.get("memory_kb")) / 1024**2,
        disk_gb=_int(values.get("disk_kb")) / 1024**2,
        unreachable=tuple(unreachable),
        gpus=tuple(gpus),
    )


def _int(text: str | None) -> int:
    return int(text) if text and text.strip().isdigit() else 0


async def first_failure(awaitables: Sequence[Awaitable[object]]) -> None:
    """Run ``awaitables`` together until all have succeeded, or raise the first failure
    as soon as it comes (of those that failed at once, the earliest in ``awaitables``),
    the rest cancelled and awaited first."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    if not tasks:
        return
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task.done() and not task.cancelled() and (error := task.exception()) is not None:
                raise error
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def all_of(coros: Iterable[Awaitable[object]]) -> None:
    """Run all; if any fails, wait for the rest and raise the first failure."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result

