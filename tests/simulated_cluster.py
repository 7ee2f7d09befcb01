"""A simulated pool of many cheap nodes behind the real head relay, for the scale
benchmark (benchmarks/bench_simulated.py).

``SimulatedProvider`` opens a pool whose client side is all real: the client, driver,
scheduler, event bus and console, speaking the relay protocol (``core.messages``,
authenticated, compressed where it pays) over a Unix socket to a real ``RelayServer``.
That server runs in a process of its own (``python tests/simulated_cluster.py``), as a
remote pool's head relay does on node 0, so the client's CPU is the client's alone. Only
the nodes behind it are simulated: ``SimulatedBackend`` answers each node's calls as an
agent would (the request decoded, run by ``node.execution.execute`` as an agent runs it,
the outcome encoded as an agent's reply) inline on the relay's event loop, so a thousand
nodes cost a thousand small objects, not a thousand processes or threads. Work on them is
therefore serial within the relay process: the simulation is for trivial tasks, where what
is measured is the control plane's cost per call, per item and per node.

While the client listens for metrics, every node sends what a one-GPU node's sampler
sends (``METRICS``) once a second. Provisioning is simulated with ``delay``: ``launch``
waits that long before the nodes exist, so an open's control-plane overhead is its time
less ``delay``. Not simulated (yet): nodes failing, elastic membership, task output,
collections (the pool has none), lanes between the relay and its agents.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import skyward as sky
from skyward.core import handshake
from skyward.core.instance import InstanceInfo, NetworkInfo, PeerInfo
from skyward.engine.events import EventBatch
from skyward.engine.relay_server import RelayServer, Sink
from skyward.engine.transport import Shared
from skyward.engine.transports.relay import RelayEndpoint, RelayTransport
from skyward.engine.wire import Payload, TaskFailure, TaskRequest, decode, encode
from skyward.model.nodes import NodeHandle
from skyward.node.execution import execute
from skyward.observe.events import Metric
from skyward.providers.base import LaunchedCluster, Offer

READY_TIMEOUT = 30.0
"""Seconds the relay process has to say it listens."""
SAMPLE_EVERY = 1.0
"""Seconds between a simulated node's metric samples."""
METRICS = (("cpu", "%"), ("memory", "%"), ("memory_used", "MB"), ("memory_total", "MB"), ("gpu", "%"),
           ("gpu_memory", "%"), ("gpu_memory_total", "MB"), ("gpu_temp", "C"))
"""What a node with one GPU samples (``observe.metrics``'s collectors)."""


class SimulatedBackend:
    """The relay's backend over ``nodes`` simulated nodes (see the module)."""

    def __init__(self, nodes: int, sink: Sink) -> None:
        self.nodes = nodes
        self._sink = sink
        self._published = [0] * nodes
        self._sampling: asyncio.Task[None] | None = None
        self._keys = 0
        self._shared: dict[int, TaskRequest] = {}
        """A shared payload (a broadcast's), decoded once for every node: each real node
        decodes its own copy at the same time as the others, so decoding it once per node
        in a row would measure the simulation, not the pool."""

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        try:
            if not isinstance(payload, Shared):
                request: TaskRequest = decode(payload)
            elif (found := self._shared.get(payload.key)) is not None:
                request = found
            else:
                request = self._shared[payload.key] = decode(payload.handle)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - answered as an agent answers an unloadable task
            return encode((False, TaskFailure.from_exception(exc, node), 0))
        return encode((*execute(request, node), 0))

    async def share(self, payload: Payload) -> Shared:
        self._keys += 1
        return Shared(self._keys, payload)

    def unshare(self, shared: Shared) -> None:
        self._shared.pop(shared.key, None)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        raise NotImplementedError("the simulated pool has no distributed collections")

    def forget_collection(self, call_id: int) -> None:
        pass

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        raise NotImplementedError("the simulated pool's nodes do not change")

    def detach(self, node: int, reason: str) -> None:
        pass

    def set_metrics(self, on: bool) -> None:
        """Every node samples ``METRICS`` once a second while someone listens, as a GPU node's sampler does."""
        if on and self._sampling is None:
            self._sampling = asyncio.get_running_loop().create_task(self._sample())
        elif not on and self._sampling is not None:
            self._sampling.cancel()
            self._sampling = None

    async def _sample(self) -> None:
        while True:
            for node in range(self.nodes):
                self._published[node] += len(METRICS)
                batch = EventBatch([Metric(node, name, 50.0, unit) for name, unit in METRICS], 0, self._published[node])
                self._sink.events(node, batch.encode())
            await asyncio.sleep(SAMPLE_EVERY)

    def release_holds(self) -> None:
        pass

    def end(self) -> None:
        pass


def serve(address: str, nodes: int) -> None:
    """Serve one client on the Unix socket ``address`` (the secret: stdin's first line, in
    hex), over ``nodes`` simulated nodes; print ``listening`` once it does, exit when the
    client's session is over."""
    secret = bytes.fromhex(sys.stdin.readline().strip())

    async def main() -> None:
        server = RelayServer(secret, lambda sink: SimulatedBackend(nodes, sink), compress=True)
        listener = await asyncio.start_unix_server(server.handle, address)
        os.chmod(address, 0o600)
        print("listening", flush=True)
        await server.finished.wait()
        listener.close()

    asyncio.run(main())


def _info(node: int, count: int, pool_id: str) -> InstanceInfo:
    peers = [PeerInfo(rank, "127.0.0.1") for rank in range(count)] if count <= 16 else []
    return InstanceInfo(node, 0, count, 1, 0.0, 0.0, "127.0.0.1", 0, pool_id, peers, None, NetworkInfo("lo"))


class _NoCollections:
    def operations(self) -> Any:
        raise NotImplementedError("the simulated pool has no distributed collections")

    def membership_changed(self, left: int | None, reason: str) -> None:
        pass

    def release(self) -> None:
        pass

    def results_arrived(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class SimulatedProvider:
    """A pool of simulated nodes behind a real relay process (see the module); ``delay``:
    the seconds provisioning takes."""

    name: ClassVar[str] = "simulated"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = False
    options_used: ClassVar[frozenset[str]] = frozenset()
    delay: float = 0.0

    def validate(self, spec: sky.Spec, options: sky.Options) -> None:
        if spec.node_count.floor != spec.node_count.ceiling:
            raise NotImplementedError("the simulated pool has a fixed number of nodes")
        if spec.volumes:
            raise NotImplementedError("the simulated pool mounts no volumes")

    def offers(self, spec: sky.Spec) -> list[Offer]:
        return []

    def default_storage(self, spec: sky.Spec) -> sky.Storage | None:
        return None

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> LaunchedCluster:
        count = spec.node_count.floor
        time.sleep(self.delay)
        folder = tempfile.mkdtemp(prefix="simulated-relay-")
        address = os.path.join(folder, "relay.sock")
        secret = handshake.new_secret()
        path = os.pathsep.join(entry for entry in sys.path if entry)  # the client's modules, as a local pool's nodes
        relay = subprocess.Popen(
            [sys.executable, __file__, address, str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert relay.stdin is not None and relay.stdout is not None
        relay.stdin.write(secret.hex() + "\n")
        relay.stdin.close()
        ready = _line_within(relay, READY_TIMEOUT)
        if ready != "listening":
            relay.kill()
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"the simulated relay did not start (it said {ready!r})")

        def stop() -> None:
            try:
                relay.wait(10)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
            shutil.rmtree(folder, ignore_errors=True)

        infos = tuple(_info(node, count, pool_id) for node in range(count))
        nodes = tuple(NodeHandle(f"{pool_id}-{i}", "127.0.0.1", instance_type="simulated") for i in range(count))
        client = RelayTransport(RelayEndpoint.on_unix_socket(address, secret, compress=True))
        return LaunchedCluster(nodes, infos, client, encode, _NoCollections(), stop)


def _line_within(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``process`` prints, or "" if it prints none within ``timeout``."""
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline().strip()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
