"""``RemoteMembership``: adding and removing hosts of a running remote pool (``sky.SSH``,
and clouds through the same path).

A provider says where more machines come from (``Machines``: the SSH hosts a pool does
not use yet, or a cloud's new instances). A node joins by the same steps the pool's
first hosts took (``HostPath.up``: connect, check, ship, bootstrap, watchdog), then
Ray on it joins the head's cluster and the head relay starts its agent, pinned there by
the host's own resource. A node leaves when the relay forgets its agent, its watchdog
stops the pool's processes there and the provider lets the machine go.

A host is lost when its watchdog's SSH stream ends without the pool asking (the machine
or its sshd vanished); the provider says whether it was taken back (a spot
interruption) and, every reconcile tick, which of its machines are gone. The head node
(rank 0) holds the Ray head, the relay and the collections: this membership never removes
it, and losing it ends the pool (its calls fail with ConnectionError). A pool that may
have no node stops its whole cluster instead when the head leaves last (``sleeping``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from skyward.engine.membership import Floor, Joined, Loss
from skyward.engine.transports.relay import RelayTransport, RemoteAgent
from skyward.model.nodes import NodeHandle
from skyward.providers.ssh.cluster import RemoteNode

if TYPE_CHECKING:
    from skyward.providers.ssh.launch import HostPath

STOP_TIMEOUT = 120.0
RAY_JOIN_TIMEOUT = 180.0


class Machines(Protocol):
    """Where a remote pool's machines come from once it runs."""

    def capacity(self) -> int | None:
        """The most machines the pool can have at once (None: no limit known)."""

    def create(self, node: int) -> NodeHandle:
        """A machine for rank ``node``, reachable over SSH (it may still be booting).
        Raises naming the cause when none can be had."""

    def release(self, handle: NodeHandle) -> None:
        """The pool is done with ``handle``'s machine (a cloud terminates it)."""

    def explain(self, node: int, handle: NodeHandle, seen: str) -> Loss | None:
        """Why rank ``node``'s machine (``handle``) is gone, as the provider sees it
        (``seen``: what the client saw), or None when the provider has nothing to add."""

    def gone(self, handles: dict[int, NodeHandle]) -> list[Loss]:
        """The ranks among ``handles`` whose machine the provider knows is gone."""


class RemoteMembership:
    """See the module. ``handles`` are the pool's first hosts, by rank."""

    def __init__(
        self, path: HostPath, transport: RelayTransport, machines: Machines, handles: dict[int, NodeHandle],
        ready_timeout: float,
    ) -> None:
        self._path = path
        self._transport = transport
        self._machines = machines
        self._handles = dict(handles)
        self._ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self._closed = False
        self._lost: Callable[[Loss], None] | None = None

    def capacity(self) -> int | None:
        return self._machines.capacity()

    def lowest(self) -> Floor:
        """1: node 0 is the head and never leaves (``sleeping`` pools can have none)."""
        return Floor(1, (
            "node 0 of a remote pool holds Ray, the relay and the collections and never leaves; resize to min=1 or "
            "more, or open the pool with sky.Nodes(min=0) and sky.Options(cluster=False) to let it sleep with no node"
        ))

    def add(self, node: int) -> Joined:
        self._check_open(node)
        handle = self._machines.create(node)
        cluster, loop = self._path.cluster, self._path.loop
        try:
            self._check_open(node)
            [host] = self._path.up([handle], [node])
            from skyward.providers.ssh.launch import includes_path, resources

            loop.run(cluster.join_ray(host, resources(host), {"PYTHONPATH": includes_path(cluster.nodes[0])}), RAY_JOIN_TIMEOUT)
            setup = self._path.setup(host)
            self._transport.attach(node, RemoteAgent(host.serial, setup, self._ready_timeout))
        except BaseException:
            stale = cluster.node_of(handle)
            if stale is not None:
                loop.run(cluster.stop_node(stale), STOP_TIMEOUT)
            self._machines.release(handle)
            raise
        with self._lock:
            self._handles[node] = handle
        self._follow(host)
        return Joined(handle, setup.info)

    def remove(self, node: int) -> None:
        if node == 0:
            raise ValueError("node 0 of a remote pool is its head (Ray, the relay, the collections): it never leaves")
        self._transport.detach(node, f"node {node} was removed from the pool")
        cluster = self._path.cluster
        host = cluster.node(node)
        with self._lock:
            handle = self._handles.pop(node, None)
        if host is not None:
            self._path.loop.run(cluster.stop_node(host), STOP_TIMEOUT)
        if handle is not None:
            self._machines.release(handle)

    def watch(self, lost: Callable[[Loss], None]) -> None:
        self._lost = lost
        for host in list(self._path.cluster.nodes):
            self._follow(host)

    def check(self) -> list[Loss]:
        with self._lock:
            handles = dict(self._handles)
        return self._machines.gone(handles)

    def close(self) -> None:
        """The pool is closing: no host joins any more."""
        with self._lock:
            self._closed = True

    def _check_open(self, node: int) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"node {node} was not added: the pool is closing")

    def _follow(self, host: RemoteNode) -> None:
        """Report ``host`` lost when its watchdog's stream ends unasked."""
        if self._lost is None or host.index == 0:
            return  # losing the head ends the pool: its relay stream breaks
        self._path.loop.loop.call_soon_threadsafe(self._path.cluster.watch, host, self._on_lost)

    def _on_lost(self, host: RemoteNode, seen: str) -> None:
        threading.Thread(target=self._report, args=(host, seen), name="skyward-node-lost", daemon=True).start()

    def _report(self, host: RemoteNode, seen: str) -> None:
        with self._lock:
            if self._closed or self._handles.get(host.index) is not host.handle:
                return
        try:
            loss = self._machines.explain(host.index, host.handle, seen)
        except Exception:  # the provider cannot say: what the client saw is enough
            loss = None
        if self._lost is not None:
            self._lost(loss or Loss(host.index, seen))
