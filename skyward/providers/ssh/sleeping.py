"""A remote pool that may have no node (``Nodes(min=0)`` or ``desired=0`` on ``sky.SSH``,
the machine clouds and ``sky.AWS``). Everything a remote pool runs (Ray, the head relay,
the agents) lives on its nodes, head included, so with no node it has nothing at all: it
sleeps, and costs nothing.

``sleeping`` gives the pool a ``LaunchedCluster`` that opens with no node. Its membership starts
the whole remote cluster through the provider (a launch of one node, the head) when node
0 joins, adds the other ranks through that cluster's own membership, and stops the whole
cluster, the way closing the pool does (processes ended, machines deleted, confirmed),
when node 0 leaves as the last node. The driver's transport is a ``TransportSwitch``
that follows the cluster running now. Such a pool has no collections (checked before it
opens: ``check_remote_nodes``), since their contents would go with the head.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from skyward.collections.config import DISABLED
from skyward.collections.operations import Operations
from skyward.core.errors import PoolClosedError
from skyward.engine.membership import NO_FLOOR, Floor, Joined, Loss, Membership
from skyward.engine.transports.relay import RemoteAgent
from skyward.engine.transports.switch import TransportSwitch
from skyward.model.spec import Nodes, Options, Spec
from skyward.providers.base import LaunchedCluster, TeardownError
from skyward.providers.ssh.launch import encoder_for

WAKE_WAIT = 1800.0
"""The longest a node joining waits for the head to start (the launch itself is bounded
by the provisioning, SSH, bootstrap and readiness timeouts)."""

Launch = Callable[[Spec, Options, str], LaunchedCluster]
"""A provider's ``launch``."""


def sleeping(launch: Launch, spec: Spec, options: Options, pool_id: str, capacity: int | None) -> LaunchedCluster:
    """The ``LaunchedCluster`` of a remote pool of ``spec`` whose floor is 0: no node yet; node 0
    joining runs ``launch`` for one node (``capacity``: the most nodes the provider has
    room for, None: no limit known)."""
    head = replace(spec, nodes=Nodes(desired=1, max=spec.node_count.ceiling))
    switch: TransportSwitch[RemoteAgent] = TransportSwitch()
    membership = SleepingMembership(lambda: launch(head, options, pool_id), switch, capacity)
    return LaunchedCluster((), (), switch, encoder_for(spec), NoCollections(), membership.stop, membership=membership)


class SleepingMembership:
    """The ``Membership`` of a remote pool that may have no node (see the module):
    ``wake`` launches its cluster with the head alone."""

    def __init__(self, wake: Callable[[], LaunchedCluster], switch: TransportSwitch[RemoteAgent], capacity: int | None) -> None:
        self._wake = wake
        self._switch = switch
        self._capacity = capacity
        self._cluster: LaunchedCluster | None = None
        self._ranks: set[int] = set()
        self._changing = threading.Lock()
        """Held while the cluster starts or stops."""
        self._state = threading.Condition()
        self._failure: str | None = None
        """Why the last start of the head failed (None once one begins)."""
        self._closed = False
        self._lost: Callable[[Loss], None] | None = None

    def capacity(self) -> int | None:
        return self._capacity

    def lowest(self) -> Floor:
        """None: the whole cluster stops when its last node leaves."""
        return NO_FLOOR

    def add(self, node: int) -> Joined:
        """Node 0 of a pool with no node starts the cluster; any other rank waits for the
        head (at most ``WAKE_WAIT``) and joins through its cluster."""
        with self._state:
            asleep = self._cluster is None
        if node == 0 and asleep:
            return self._start()
        joined = _members(self._awake(node)).add(node)
        with self._state:
            self._ranks.add(node)
        return joined

    def remove(self, node: int) -> None:
        """Node 0 leaving as the last node stops the whole cluster (confirmed, or
        ``TeardownError``); another rank leaves through the cluster's membership."""
        with self._state:
            cluster, last = self._cluster, self._ranks <= {node}
        if cluster is None:
            return
        if node == 0 and last:
            self._sleep()
            return
        _members(cluster).remove(node)
        with self._state:
            self._ranks.discard(node)

    def watch(self, lost: Callable[[Loss], None]) -> None:
        self._lost = lost
        cluster = self._cluster
        if cluster is not None:
            _members(cluster).watch(lost)

    def check(self) -> list[Loss]:
        cluster = self._cluster
        return [] if cluster is None else _members(cluster).check()

    def stop(self) -> None:
        """The pool closes: no node starts any more; a start under way is waited for (at
        most ``WAKE_WAIT``), then the cluster, if any, is stopped (``TeardownError`` when
        that cannot be confirmed)."""
        with self._state:
            self._closed = True
            self._state.notify_all()
        if not self._changing.acquire(timeout=WAKE_WAIT):
            raise TeardownError(f"the pool's head was still starting after {WAKE_WAIT:g}s; it may be left running")
        try:
            with self._state:
                cluster, self._cluster = self._cluster, None
            if cluster is not None:
                self._switch.disconnect()
                cluster.end()  # its transport is closed already
        finally:
            self._changing.release()

    def _start(self) -> Joined:
        """Launch the cluster with the head alone and connect the driver to it."""
        with self._changing:
            with self._state:
                if self._closed:
                    raise PoolClosedError("node 0 was not added: the pool is closing")
                self._failure = None
            try:
                cluster = self._wake()
                try:
                    self._switch.connect(cluster.transport)
                except BaseException:
                    cluster.end()
                    raise
            except BaseException as exc:
                with self._state:
                    self._failure = f"{type(exc).__name__}: {exc}"
                    self._state.notify_all()
                raise
            with self._state:
                self._cluster, self._ranks = cluster, {0}
                self._state.notify_all()
            if self._lost is not None:
                _members(cluster).watch(self._lost)
            return Joined(cluster.nodes[0], cluster.infos[0])

    def _sleep(self) -> None:
        """Stop the whole cluster, as closing the pool does; the pool has no node after."""
        with self._changing:
            with self._state:
                cluster, self._cluster, self._ranks = self._cluster, None, set()
            if cluster is None:
                return
            self._switch.disconnect()
            cluster.end()  # its transport is closed already

    def _awake(self, node: int) -> LaunchedCluster:
        """The running cluster, once the head is up; RuntimeError naming ``node`` when the
        head's start failed, the pool closes, or ``WAKE_WAIT`` passes."""
        with self._state:
            self._state.wait_for(
                lambda: self._cluster is not None or self._closed or self._failure is not None, WAKE_WAIT
            )
            if self._cluster is not None and not self._closed:
                return self._cluster
            why = "the pool is closing" if self._closed else self._failure or f"it did not start within {WAKE_WAIT:g}s"
        raise RuntimeError(f"node {node} was not added: the pool's head (node 0) is not up: {why}")


class NoCollections:
    """The client's collections of a pool that has none (``Options(cluster=False)``)."""

    def operations(self) -> Operations:
        raise RuntimeError(DISABLED)

    def membership_changed(self, left: int | None, reason: str) -> None:
        """Nothing to tell."""

    def release(self) -> None:
        """Nothing to release."""

    def results_arrived(self) -> None:
        """Nothing cached."""


def _members(cluster: LaunchedCluster) -> Membership:
    """The running cluster's own membership (a remote launch always has one)."""
    assert cluster.membership is not None, "a remote pool's cluster has a membership"
    return cluster.membership

