"""Start and stop a skyward cluster on hosts reached over SSH.

One SSH connection per host carries everything: bootstrap, ``ray start`` (head on
node 0, the others joining it, each bound to the host's own address and authenticated
by a per-pool Ray token that only travels on stdin), a keeper per node (heartbeats on
its stdin; it stops the pool's processes ``ttl`` seconds after the client vanished),
the head agent on node 0, and the port forward the client's driver uses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
import secrets
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncssh

from skyward.bootstrap import runner
from skyward.bootstrap.ssh import HostAddress, KnownHosts, connect
from skyward.bootstrap.versions import mismatches
from skyward.cluster import remote_protocol as protocol

log = logging.getLogger("skyward.remote")
# The pool's Ray token arrives as the first line of stdin: never on a command line.
_TOKEN_ENV = "read -r RAY_AUTH_TOKEN && export RAY_AUTH_TOKEN RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0"
HEARTBEAT = 2.0
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0


class VersionMismatchError(RuntimeError):
    """Client and a node disagree on Python, cloudpickle or skyward."""


@dataclass
class RemoteNode:
    """One host of the cluster and what runs there for the pool."""

    index: int
    address: HostAddress
    conn: asyncssh.SSHClientConnection
    private_ip: str = ""
    pool_dir: str = ""
    ready: runner.Bootstrapped | None = None
    keeper: Any = None
    streams: list[Any] = field(default_factory=list)


class RemoteCluster:
    """The hosts of one pool: connect, bootstrap, start Ray and the head agent, stop."""

    def __init__(self, pool_id: str, ttl: int, on_phase: Callable[[str, float, int | None], None]) -> None:
        self.pool_id = pool_id
        self.ttl = ttl
        self.token = secrets.token_hex(32)
        self.nodes: list[RemoteNode] = []
        self.gcs_port = 0
        self.head_process: Any = None
        self.forward: Any = None
        self._on_phase = on_phase
        self._heartbeat: asyncio.Task[None] | None = None

    def pool_dir(self, index: int) -> str:
        """Per-node pool directory (unique per node, short enough for Ray's sockets)."""
        return f"/tmp/skyward-{self.pool_id[:12]}-n{index}"

    async def connect(self, addresses: list[HostAddress], key_path: str | None, known: KnownHosts, timeout: float) -> None:
        started = time.monotonic()
        results = await asyncio.gather(
            *(connect(a, key_path, known, timeout) for a in addresses), return_exceptions=True
        )
        for index, (address, result) in enumerate(zip(addresses, results)):
            if isinstance(result, asyncssh.SSHClientConnection):
                self.nodes.append(RemoteNode(index, address, result, pool_dir=self.pool_dir(index)))
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        facts = await asyncio.gather(*(node.conn.run("echo $SSH_CONNECTION; uname -m", check=False, timeout=timeout) for node in self.nodes))
        for node, fact in zip(self.nodes, facts):
            lines = str(fact.stdout).split("\n")
            node.private_ip = lines[0].split()[2] if len(lines[0].split()) >= 3 else node.address.host
        self._on_phase("ssh", time.monotonic() - started, None)

    async def bootstrap(self, script_for: Callable[[RemoteNode], str], shipment: runner.Shipment, timeout: float) -> None:
        async def one(node: RemoteNode) -> None:
            started = time.monotonic()
            await runner.ship(node.conn, shipment)
            self._on_phase("ship", time.monotonic() - started, node.index)
            node.ready = await runner.bootstrap(
                node.conn, str(node.address), script_for(node), node.pool_dir, timeout,
                lambda phase, seconds: self._on_phase(phase, seconds, node.index),
            )

        await _all(one(node) for node in self.nodes)

    def check_versions(self, client: dict[str, str], check_digest: bool) -> None:
        for node in self.nodes:
            assert node.ready is not None
            found = mismatches(client, node.ready.versions, check_digest)
            if found:
                raise VersionMismatchError(
                    f"node {node.index} ({node.address}) does not match this client: {'; '.join(found)}. "
                    'Use Image(python="auto") and skyward_source="auto" so nodes get the client\'s '
                    "versions, or run the client with the nodes' versions"
                )

    async def start_keepers(self) -> None:
        async def one(node: RemoteNode) -> None:
            assert node.ready is not None
            python = posixpath.join(node.ready.env_dir, "venv/bin/python")
            script = shlex.quote(posixpath.join(node.ready.site, "cluster", "remote_keeper.py"))
            command = f"exec {shlex.quote(python)} -u {script} {shlex.quote(node.pool_dir)} {self.ttl}"
            node.keeper = await node.conn.create_process(command, stderr=asyncssh.STDOUT)
            line = await asyncio.wait_for(node.keeper.stdout.readline(), START_TIMEOUT)
            if not line.startswith("::keeper"):
                rest = await asyncio.wait_for(node.keeper.stdout.read(), 5)
                raise RuntimeError(f"the keeper on {node.address} did not start:\n{line}{rest}")

        await _all(one(node) for node in self.nodes)
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while True:
            for node in self.nodes:
                if node.keeper is not None:
                    try:
                        node.keeper.stdin.write("beat\n")
                    except Exception:
                        pass
            await asyncio.sleep(min(HEARTBEAT, max(0.2, self.ttl / 3)))

    async def start_ray(self, resources: Callable[[RemoteNode], dict[str, float]], env: dict[str, str]) -> None:
        started = time.monotonic()
        head = self.nodes[0]
        ports = _ports(5)
        self.gcs_port = ports[0]
        head_args = [  # no Ray Client server: the minimal ray package has none
            "--head", f"--port={self.gcs_port}", "--include-dashboard=false",
            f"--dashboard-agent-listen-port={ports[1]}", f"--dashboard-agent-grpc-port={ports[2]}",
            f"--runtime-env-agent-port={ports[3]}", f"--metrics-export-port={ports[4]}",
        ]
        address = f"{head.private_ip}:{self.gcs_port}"

        async def worker(node: RemoteNode) -> None:
            others = _ports(4)
            args = [
                f"--address={address}", f"--dashboard-agent-listen-port={others[0]}",
                f"--dashboard-agent-grpc-port={others[1]}", f"--runtime-env-agent-port={others[2]}",
                f"--metrics-export-port={others[3]}",
            ]
            await self._ray_start(node, args, resources(node), env)

        # Workers start alongside the head: `ray start --address` waits for the GCS.
        await _all([self._ray_start(head, head_args, resources(head), env), *(worker(n) for n in self.nodes[1:])])
        self._on_phase("ray", time.monotonic() - started, None)

    async def _ray_start(self, node: RemoteNode, args: list[str], resources: dict[str, float], env: dict[str, str]) -> None:
        assert node.ready is not None
        ray = posixpath.join(node.ready.env_dir, "venv/bin/ray")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (
            f"{_TOKEN_ENV} {exports} && exec {shlex.quote(ray)} start {' '.join(shlex.quote(a) for a in args)} "
            f"--node-ip-address={node.private_ip} --temp-dir={shlex.quote(node.pool_dir + '/ray')} "
            f"--resources={shlex.quote(json.dumps(resources))} --disable-usage-stats "
            "--log-style=record --log-color=false"
        )
        result = await asyncio.wait_for(node.conn.run(command, input=self.token + "\n", check=False), START_TIMEOUT)
        if result.exit_status != 0:
            output = (str(result.stdout) + str(result.stderr)).replace(self.token, "***")[-3000:]
            raise RuntimeError(f"`ray start` failed on node {node.index} ({node.address}):\n{output}")

    async def start_head_agent(self, config: Any) -> tuple[int, float]:
        """Start the head agent on node 0; returns the local forwarded port and its start time."""
        head = self.nodes[0]
        assert head.ready is not None
        python = posixpath.join(head.ready.env_dir, "venv/bin/python")
        command = (
            f"cd {shlex.quote(head.pool_dir)} && {_TOKEN_ENV} && exec {shlex.quote(python)} -u -c "
            f"{shlex.quote('from skyward.cluster.head_agent import main; main()')} {shlex.quote(head.pool_dir)}"
        )
        process = await head.conn.create_process(command, encoding=None, stderr=asyncssh.STDOUT)
        self.head_process = process
        data = protocol.dumps(config)
        process.stdin.write(self.token.encode() + b"\n" + protocol.HEADER.pack(len(data)) + data)
        lines: list[str] = []
        while True:
            raw = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)
            if not raw:
                raise RuntimeError("the head agent on node 0 exited while starting:\n" + "\n".join(lines[-40:]))
            line = raw.decode(errors="replace").rstrip()
            if line.startswith("::agents "):
                agents = float(line.split()[1])
            elif line.startswith("::listening "):
                remote_port = int(line.split()[1])
                break
            elif line.startswith("::error "):
                lines.append(line[8:])
            else:
                lines.append(line)
        self.forward = await head.conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", remote_port)
        asyncio.ensure_future(self._stream_logs(process))
        return self.forward.get_port(), agents

    async def _stream_logs(self, process: Any) -> None:
        try:
            async for raw in process.stdout:
                log.debug("head agent: %s", raw.decode(errors="replace").rstrip())
        except Exception:
            pass

    async def stop(self) -> None:
        """Stop every process of the pool on every host and remove its files."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()

        async def one(node: RemoteNode) -> None:
            if node.keeper is not None:
                try:
                    node.keeper.stdin.write("stop\n")
                    await asyncio.wait_for(node.keeper.wait(), STOP_TIMEOUT)
                except Exception as exc:
                    log.warning("keeper on %s: %s", node.address, exc)
            else:
                await node.conn.run(f"rm -rf {shlex.quote(node.pool_dir)}", check=False, timeout=STOP_TIMEOUT)

        try:
            await asyncio.gather(*(one(node) for node in self.nodes), return_exceptions=True)
        finally:
            if self.forward is not None:
                self.forward.close()
            for node in self.nodes:
                node.conn.close()
            await asyncio.gather(*(n.conn.wait_closed() for n in self.nodes), return_exceptions=True)


async def _all(coros: Any) -> None:
    """Run all; if any fails, wait for the rest and raise the first failure."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(20000 + secrets.randbelow(20000))
    return list(ports)
