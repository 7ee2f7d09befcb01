"""``Reconciler``: keeps a running pool's nodes what the pool wants.

One loop on the pool's event loop, woken every ``Options.reconcile_tick_interval``
seconds (at once when a node is reported lost, on ``pool.resize``, and while a pool
with no node has work waiting). Each round it

1. asks the provider which nodes are gone (``Membership.check``; providers also report
   losses as they notice them, ``Membership.watch``),
2. lets the ``Autoscaler`` set the target from the work waiting and the idle nodes,
3. adds nodes up to the target (next free rank) and drains, then removes, the highest
   ranks above it, and replaces lost nodes at their rank,
4. runs the health checks that are due (``Options.health_checker``).

A pool that may have no node (a floor of 0) sleeps once its last node left and wakes
when work waits; when it cannot start a node then, the work waiting fails with
``WakeError`` and nothing starts until work waits again.

A lost node: its rank leaves the scheduler (work pinned to it waits for the
replacement), the transport fails the calls in flight to it at once (the driver runs
them again elsewhere, see ``engine.retry``), the collections learn it left, the
provider cleans up what is left of it and a replacement joins at the same rank. A node
leaving by scale-down is drained first: it takes no new work and leaves once idle (or
after ``Options.shutdown_timeout``). Every change publishes a new membership view,
which each node gets with its next request (``engine.views``).

Adding and removing nodes block (a cloud machine takes minutes), so they run on worker
threads (``MEMBERSHIP_THREADS`` at once); the loop itself never waits for them.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Never

from msgspec import Struct

from skyward.core.errors import WakeError
from skyward.core.validation import wait_limit
from skyward.engine.autoscale import Autoscaler, Load
from skyward.engine.driver import PoolDriver
from skyward.engine.health import HealthTracker, check_once
from skyward.engine.members import Members
from skyward.engine.membership import Joined, Loss, Membership
from skyward.engine.transport import Transport
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Nodes, Options
from skyward.observe.events import ClusterResized, Error, Event, InstanceDestroyed, InstancePreempted, InstanceReplaced

JOIN_RETRY = 5.0
"""Seconds before a node that failed to join is tried again (at least one tick)."""
STOP_WAIT = 60.0
"""How long closing the pool waits for nodes still joining or leaving."""
IDLE_POLL = 0.1
"""How often a pool with no node looks for waiting work (to wake on demand)."""
CHECK_LIMIT = 30.0
"""The longest ``Membership.check`` may take."""
MEMBERSHIP_THREADS = 32
"""Nodes joining or leaving at once: a pool growing to 1,000 nodes whose machines take a
minute each joins in about half an hour, not two (8 at once, before); a cloud's client
backs off where its API throttles the launches."""


class Hooks(Struct, frozen=True):
    """What the reconciler tells the pool: events (``emit``, ``wants``), a node joining
    (``announce(node, handle, seconds)``: its provisioning events), the collections
    (``changed(left, reason)``, blocking: ``left`` is the rank of a node that left, None
    when one joined) and the nodes it now pays for (``reprice``)."""

    emit: Callable[[Event], None]
    wants: Callable[[type], bool]
    announce: Callable[[int, NodeHandle, float], None]
    changed: Callable[[int | None, str], None]
    reprice: Callable[[list[NodeHandle]], None]


class Reconciler:
    """Compares the nodes a pool wants with those it has, and acts (see the module)."""

    def __init__(
        self,
        pool: str,
        nodes: Nodes,
        options: Options,
        driver: PoolDriver,
        transport: Transport[Never],
        membership: Membership,
        members: Members,
        hooks: Hooks,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._pool = pool
        self._autoscaler = Autoscaler(nodes, options.autoscale_cooldown, options.autoscale_idle_timeout)
        self._tick = options.reconcile_tick_interval
        self._drain_limit = wait_limit(options.shutdown_timeout)
        self._health = HealthTracker(options.health_checker) if options.health_checker is not None else None
        self._driver = driver
        self._scheduler = driver.scheduler
        self._transport = transport
        self._membership = membership
        self.members = members
        self._hooks = hooks
        self._loop = loop
        self._joining: dict[int, str | None] = {}
        """Ranks being added: the reason of the loss they replace, or None (a new node)."""
        self._replacing: dict[int, str] = {}
        self._draining: set[int] = set()
        self._removing: set[int] = set()
        self._retry_at: dict[int, float] = {}
        self._checked_at = -math.inf
        self._threads = ThreadPoolExecutor(MEMBERSHIP_THREADS, thread_name_prefix="skyward-membership")
        self._tasks: set[asyncio.Task[None]] = set()
        """Nodes joining, leaving or being cleaned up: awaited when the pool closes."""
        self._probes: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._wake_failure: tuple[int, Exception] | None = None
        """The first node that failed to join since the pool had no node, and why."""
        self._stopped = False

    @property
    def nodes(self) -> Nodes:
        """The bounds the pool runs with now."""
        return self._autoscaler.nodes

    @property
    def target(self) -> int:
        """How many nodes the pool wants now."""
        return self._autoscaler.target

    # ------------------------------------------------------------------ from any thread

    def start(self) -> None:
        """Start the loop (from a thread other than the loop's)."""
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def resize(self, nodes: Nodes) -> None:
        """Run with ``nodes`` from now on; the target becomes ``nodes.desired``. ValueError
        when ``nodes.floor`` is below what the membership can shrink to."""
        lowest = self._membership.lowest()
        if nodes.floor < lowest.nodes:
            raise ValueError(
                f"pool.resize(): min={nodes.floor} is below this pool's lowest size, {lowest.nodes}: {lowest.why}"
            )
        self._loop.call_soon_threadsafe(self._resize, nodes)

    def lost(self, loss: Loss) -> None:
        """The provider found node ``loss.node`` gone (any thread)."""
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._lose, loss.node, loss.reason, "preempted" if loss.preempted else "lost")

    def stop(self) -> None:
        """Stop reconciling; wait (bounded) for nodes joining or leaving, removing any
        that joined meanwhile (from a thread other than the loop's)."""
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(STOP_WAIT + 10)
        finally:
            self._threads.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ the loop

    async def _start(self) -> None:
        self._wake = asyncio.Event()
        now = time.monotonic()
        for node in self.members.ranks():
            if self._health is not None:
                self._health.joined(node, now)
        self._membership.watch(self.lost)
        self._runner = asyncio.ensure_future(self._run())

    async def _stop(self) -> None:
        self._stopped = True
        for task in [self._runner, *self._probes]:
            if task is not None:
                task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=STOP_WAIT)

    def _spawn(self, coroutine: Awaitable[None], tasks: set[asyncio.Task[None]] | None = None) -> None:
        kept = self._tasks if tasks is None else tasks
        task = asyncio.ensure_future(coroutine)
        kept.add(task)
        task.add_done_callback(kept.discard)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopped:
            try:
                await asyncio.wait_for(self._wake.wait(), self._sleep())
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._check()
                self._scale()
                self._converge()
                self._check_health()
            except Exception as exc:  # reported; the next round tries again
                self._hooks.emit(Error(f"pool {self._pool}: reconciling its nodes failed: {type(exc).__name__}: {exc}"))

    def _sleep(self) -> float:
        if not len(self.members) and not self._joining:
            return IDLE_POLL
        sleep = self._tick
        if self._health is not None:
            sleep = min(sleep, max(0.0, self._health.next_due() - time.monotonic()))
        return sleep

    async def _check(self) -> None:
        """Ask the provider for lost nodes, once per tick."""
        now = time.monotonic()
        if now - self._checked_at < self._tick:
            return
        self._checked_at = now
        losses = await asyncio.wait_for(
            self._loop.run_in_executor(self._threads, self._membership.check), CHECK_LIMIT
        )
        for loss in losses:
            self._lose(loss.node, loss.reason, "preempted" if loss.preempted else "lost")

    def _scale(self) -> None:
        ready = self._scheduler.ranks()
        load = Load(
            time.monotonic(),
            len(self.members) - len(self._draining) - len(self._removing),
            sum(1 for replaces in self._joining.values() if replaces is None),
            self._scheduler.pressure(),
            self._scheduler.slots,
            {node: self._scheduler.idle_since(node) for node in ready},
        )
        decision = self._autoscaler.decide(load)
        if decision.reason is not None:
            self._resized(f"autoscale: {decision.reason}")

    def _converge(self) -> None:
        now = time.monotonic()
        for node, reason in self._replacing.items():
            if node not in self._joining and self._retry_at.get(node, 0.0) <= now and node < self._wanted():
                self._start_join(node, reason)
        count = len(self.members) - len(self._draining) - len(self._removing) + self._new_joining()
        wanted = self._wanted()
        if count < wanted:
            for node in sorted(self._draining):  # still draining: keep it instead
                if count >= wanted:
                    break
                self._draining.discard(node)
                self._scheduler.undrain(node)
                count += 1
            while count < wanted and not self._removing:
                node = self.members.next_rank(set(self._joining))
                if self._retry_at.get(node, 0.0) > now:
                    break
                self._start_join(node, None)
                count += 1
        while count > wanted:
            top = max([*self.members.ranks(), *self._joining], default=-1)
            if top < 0 or top in self._joining or top in self._draining or top in self._removing:
                break
            if top in self._replacing:
                self._drop(top, "the pool shrank while it was being replaced")
            else:
                self._draining.add(top)
                self._scheduler.drain(top)
                self._spawn(self._leave(top, "scaled down"))
            count -= 1

    def _wanted(self) -> int:
        capacity = self._membership.capacity()
        return self.target if capacity is None else min(self.target, capacity)

    def _new_joining(self) -> int:
        return sum(1 for replaces in self._joining.values() if replaces is None)

    def _resize(self, nodes: Nodes) -> None:
        self._autoscaler.resize(nodes)
        capacity = self._membership.capacity()
        if capacity is not None and nodes.desired > capacity:
            self._hooks.emit(Error(
                f"pool {self._pool}: {nodes.desired} nodes wanted but its provider has room for {capacity}; "
                f"it runs with {capacity}"
            ))
        self._resized(f"resize to {nodes.desired}")
        self._poke()

    def _resized(self, reason: str) -> None:
        if self._hooks.wants(ClusterResized):
            self._hooks.emit(ClusterResized(self._pool, len(self._scheduler.ranks()), self._wanted(), reason))

    # ------------------------------------------------------------------ joining and leaving

    def _start_join(self, node: int, replaces: str | None) -> None:
        self._joining[node] = replaces
        self._spawn(self._join(node, replaces))

    async def _join(self, node: int, replaces: str | None) -> None:
        started = time.monotonic()
        try:
            joined: Joined = await self._loop.run_in_executor(self._threads, self._membership.add, node)
        except Exception as exc:
            self._joining.pop(node, None)
            self._retry_at[node] = time.monotonic() + max(self._tick, JOIN_RETRY)
            self._hooks.emit(Error(f"pool {self._pool}: could not add node {node}: {exc}", node=node))
            self._woke_in_vain(node, exc)
            return
        finally:
            self._joining.pop(node, None)
            self._poke()
        if self._stopped:
            await self._loop.run_in_executor(None, self._membership.remove, node)
            return
        self._wake_failure = None
        self._retry_at.pop(node, None)
        self._replacing.pop(node, None)
        view = self.members.join(node, joined.handle, joined.info)
        self._driver.views.publish(view)
        self._driver.forget(node)
        self._scheduler.add(node)
        if self._health is not None:
            self._health.joined(node, time.monotonic())
        self._hooks.announce(node, joined.handle, time.monotonic() - started)
        self._hooks.reprice(self.members.handles())
        self._loop.run_in_executor(self._threads, self._tell_collections, None, f"node {node} joined")
        if replaces is not None and self._hooks.wants(InstanceReplaced):
            self._hooks.emit(InstanceReplaced(node, f"a new node took the place of the one lost ({replaces})"))
        self._resized(f"node {node} {'replaced' if replaces is not None else 'joined'}")

    def _woke_in_vain(self, node: int, cause: Exception) -> None:
        """Node ``node`` failed to join (``cause``): when the pool may have no node, has
        none and nothing else is joining, the work waiting fails with ``WakeError`` and
        the target falls back to the floor (the next task tries again)."""
        if len(self.members) or self._autoscaler.nodes.floor > 0:
            return
        if self._wake_failure is None:
            self._wake_failure = (node, cause)
        if self._joining:
            return
        failed, first = self._wake_failure
        self._wake_failure = None
        self._autoscaler.settle()
        # the next task tries again at once (a node being cleaned up still waits)
        self._retry_at = {rank: at for rank, at in self._retry_at.items() if at == math.inf}
        error = WakeError(
            f"pool {self._pool} has no node and could not start node {failed} for the work waiting: "
            f"{type(first).__name__}: {first}. The pool stays open; the next task tries again"
        )
        waiting = self._scheduler.fail_waiting(error)
        self._resized(f"waking failed ({waiting} tasks failed with WakeError): {first}")

    async def _leave(self, node: int, reason: str) -> None:
        """Wait until the draining ``node`` is idle (bounded), then remove it."""
        deadline = None if self._drain_limit is None else time.monotonic() + self._drain_limit
        while self._scheduler.busy_on(node) and (deadline is None or time.monotonic() < deadline):
            if node not in self._draining:
                return  # wanted again
            await asyncio.sleep(0.05)
        if node not in self._draining:
            return
        self._draining.discard(node)
        self._removing.add(node)
        try:
            handle = self._forget(node, reason)
            await self._loop.run_in_executor(self._threads, self._remove, node, reason)
            if handle is not None:
                self._hooks.emit(InstanceDestroyed(node, handle.id))
            self._hooks.reprice(self.members.handles())
            asleep = "" if len(self.members) or self._joining else "; no node left: the pool sleeps until work waits"
            self._resized(f"node {node} left: {reason}{asleep}")
        finally:
            self._removing.discard(node)
            self._poke()

    def _forget(self, node: int, reason: str) -> NodeHandle | None:
        """Take ``node`` out of the scheduler, the membership and the health checks."""
        member = self.members.get(node)
        self._scheduler.remove(node, reason)
        self._driver.views.publish(self.members.leave(node))
        self._driver.forget(node)
        if self._health is not None:
            self._health.forget(node)
        return member.handle if member is not None else None

    def _remove(self, node: int, reason: str) -> None:
        """On a worker thread: the collections learn ``node`` left, the provider removes it."""
        self._transport.detach(node, reason)
        self._tell_collections(node, f"node {node} left the pool ({reason})")
        try:
            self._membership.remove(node)
        except Exception as exc:
            self._hooks.emit(Error(f"pool {self._pool}: removing node {node}: {exc}", node=node))

    def _tell_collections(self, left: int | None, reason: str) -> None:
        """On a worker thread: the collections learn of the change (a failure is reported)."""
        try:
            self._hooks.changed(left, reason)
        except Exception as exc:
            self._hooks.emit(Error(f"pool {self._pool}: telling the collections that {reason}: {exc}"))

    def _drop(self, node: int, reason: str) -> None:
        """A lost node that will not be replaced leaves for good."""
        self._replacing.pop(node, None)
        self._retry_at.pop(node, None)
        handle = self._forget(node, reason)
        if handle is not None:
            self._hooks.emit(InstanceDestroyed(node, handle.id))
        self._hooks.reprice(self.members.handles())
        self._resized(f"node {node} left: {reason}")

    def _lose(self, node: int, reason: str, kind: str) -> None:
        """Node ``node`` is gone (``kind``: "preempted", "lost" or "unhealthy"): fail its
        work over, clean up, and have a replacement take its rank."""
        member = self.members.get(node)
        if member is None or node in self._replacing or node in self._removing or self._stopped:
            return
        if kind == "preempted":
            self._hooks.emit(InstancePreempted(node, member.handle.id, reason))
        else:
            self._hooks.emit(Error(f"pool {self._pool}: node {node} ({member.handle.id}) {_KINDS[kind]}: {reason}", node))
        self._draining.discard(node)
        self._replacing[node] = reason
        self._scheduler.expect(node)
        self._transport.detach(node, f"node {node} was lost: {reason}")
        self._driver.forget(node)
        if self._health is not None:
            self._health.forget(node)
        self._resized(f"node {node} {_KINDS[kind]}")
        self._spawn(self._clean_up(node, reason))

    async def _clean_up(self, node: int, reason: str) -> None:
        """What is left of a lost node goes; then a replacement may join (``_converge``)."""
        self._retry_at[node] = math.inf  # no replacement before the old node is cleaned up
        try:
            await self._loop.run_in_executor(self._threads, self._remove, node, reason)
        finally:
            self._retry_at[node] = 0.0
            self._poke()

    # ------------------------------------------------------------------ health

    def _check_health(self) -> None:
        if self._health is None:
            return
        ready = set(self._scheduler.ranks())
        for node in self._health.due(time.monotonic()):
            if node in ready:
                self._spawn(self._probe(node), self._probes)
            else:
                self._health.record(node, time.monotonic(), None)

    async def _probe(self, node: int) -> None:
        assert self._health is not None
        error = await check_once(self._driver, self._health.checker, node)
        why = self._health.record(node, time.monotonic(), error)
        if why is not None:
            self._lose(node, why, "unhealthy")


_KINDS = {"preempted": "was preempted", "lost": "was lost", "unhealthy": "is unhealthy"}
