"""Opening a pool: ``launch`` provisions the first Spec that can be had, connects the
driver and returns an ``OpenPool``, which holds everything an open pool has; closing it
undoes the opening in reverse.

Each step registers its undoing on one ``ExitStack`` as soon as it is taken, so a
failure half-way through opening unwinds exactly what was acquired, in reverse order, and
``OpenPool.close`` unwinds the whole, in this order (the order in which an open pool has
always been torn down):

1. the plugins' ``around_client`` hooks exit (an error is reported as an event);
2. the driver refuses new work (so work in flight whose node goes away fails with
   ``PoolClosedError`` while the nodes are stopped);
3. the reconciler stops (nodes joining or leaving are waited for; an error is reported);
4. the pool leaves the registry of open pools (``sky ls``);
5. the transport closes, then the event feed delivers what it holds and stops;
6. the cluster's collections are released and the provider stops the nodes (a kept
   pool's are handed back to the pool daemon; an error is reported), then one
   ``InstanceDestroyed`` per node still a member;
7. the pool's event loop stops;
8. the cost meter stops (``CostFinal``: the cost counts until the nodes are gone), then
   ``ClusterDestroyed``;
9. the dashboard's server stops (``Options(dashboard=True)``), the console and the
   pool's logging close, and SIGTERM's handler is given back.

A kept pool's client also sends what it observes (task events, progress, cost) to the
pool daemon for its dashboard (``engine.observed``), until its transport closes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from msgspec import Struct

from skyward.api import interrupt, selection
from skyward.core.errors import AllProvidersFailedError, NoAvailableProviderError
from skyward.core.loop_thread import LoopThread
from skyward.engine import interruptible
from skyward.engine.driver import PoolDriver
from skyward.engine.events import EventFeed
from skyward.engine.health import warmed
from skyward.engine.members import Members
from skyward.engine.observed import ObservedForwarder
from skyward.engine.reconciler import Hooks, Reconciler
from skyward.engine.transports.relay import RelayTransport
from skyward.model.nodes import NodeHandle
from skyward.model.plugin import ClientPool
from skyward.model.spec import Options, Spec
from skyward.observe import log_setup
from skyward.observe.bus import EventBus
from skyward.observe.console import Console, open_console
from skyward.observe.cost import CostMeter, Pricing
from skyward.observe.events import (
    BootstrapPhase,
    ClusterDestroyed,
    ClusterProvisioned,
    ClusterReady,
    ClusterRequested,
    Error,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstanceProvisioned,
    Metric,
)
from skyward.plugins.client import ClientPlugins
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster, Launcher, pricing, with_default_storage

if TYPE_CHECKING:
    from skyward.api.dashboard import PoolDashboard

"""How long closing waits for the pool's event loop thread to end."""


class Launch(Struct, frozen=True):
    """What to open: the pool's Specs (tried in ``Options.selection`` order), its options,
    and the names and event bus the pool was made with."""

    specs: tuple[Spec, ...]
    options: Options
    name: str
    pool_id: str
    bus: EventBus
    launcher: Launcher
    """How the cluster is had: from the Spec's provider here, or from the pool daemon (``Kept``)."""


class OpenPool(Struct, frozen=True, eq=False):
    """Everything an open pool has. ``close()`` stops it all, in reverse order of opening
    (see the module); a pool is opened by ``launch`` and made ready by ``ready``."""

    request: Launch
    spec: Spec
    """The Spec the pool opened with (the first that could be had)."""
    loop: asyncio.AbstractEventLoop
    loop_thread: LoopThread
    """The thread ``loop`` runs on."""
    cluster: LaunchedCluster
    feed: EventFeed
    driver: PoolDriver
    members: Members
    reconciler: Reconciler | None
    """Keeps the node count while the pool runs; None for a cluster that cannot change
    (no ``LaunchedCluster.membership``)."""
    console: Console
    logging: log_setup.PoolLogging
    cost: CostMeter
    opened_at: float
    """``time.monotonic()`` when opening began."""
    stack: ExitStack
    dashboard: PoolDashboard | None = None
    """Its dashboard (``Options(dashboard=True)``), served once it is ready."""

    def ready(self, pool: ClientPool) -> None:
        """The pool is open (its methods work): hold it at the warming gate when its
        ``HealthChecker`` has one, list it in the registry of open pools, report ``ClusterReady``, then enter the plugins' ``around_client(pool, cluster)``
        hooks, which exit first on close."""
        bus = self.request.bus
        checker = self.request.options.health_checker
        if checker is not None and checker.gate:  # the warming gate: every node passed one check
            interruptible.result(self.loop_thread.submit(warmed(self.driver, checker, self.driver.scheduler.ranks())))
        record(self.request, self.spec, self.logging, self.cluster.nodes)
        bus.emit(ClusterReady(self.request.name, len(self.cluster.infos), time.monotonic() - self.opened_at))
        if self.dashboard is not None:
            try:
                link = self.dashboard.start()
            except Exception as exc:  # noqa: BLE001 - reported; the pool works without it
                bus.emit(Error(f"the dashboard could not be served: {type(exc).__name__}: {exc}"))
            else:
                sys.stderr.write(f"skyward: pool {self.request.name}'s dashboard (the link opens it once): {link}\n")
                sys.stderr.flush()
        plugins = ClientPlugins()
        self.stack.callback(_reporting, bus, plugins.close, _plugin_exit)
        plugins.enter(pool, self.spec, self.request.options.resolved_worker, self.cluster)

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the pool's event loop thread."""
        return self.loop_thread.is_current()

    def close(self) -> None:
        """Stop everything the pool started (see the module for the order)."""
        self.stack.close()


def launch(request: Launch, is_open: Callable[[], bool]) -> OpenPool:
    """Open the pool ``request`` describes; blocks until its nodes are up and its driver
    connected. ``is_open`` tells whether the pool is open now (not opening, not closing):
    nodes that join or leave then are written to the registry of open pools.

    A spec this provider cannot satisfy (ValueError, NotImplementedError, a provisioning
    failure) falls through to the next; a single spec's error is raised as it is, and
    when several all fail, AllProvidersFailedError (NoAvailableProviderError when none
    had a machine) lists each one's reason."""
    bus, options = request.bus, request.options
    opened_at = time.monotonic()
    with ExitStack() as stack:
        if interrupt.hold():
            stack.callback(interrupt.release)
        logging = log_setup.install(options.logging, bus.on, request.pool_id)
        stack.callback(logging.close)
        console = open_console(options.console, bus.on)
        stack.callback(console.close)
        dashboard = None
        if options.dashboard:  # its server (Starlette, uvicorn) is imported only for it
            from skyward.api.dashboard import PoolDashboard

            dashboard = PoolDashboard(bus.on, request.name)
            stack.callback(dashboard.stop)
        closing = _Closing(bus, request.name, opened_at)
        stack.callback(closing.destroyed)
        # The meter runs from when the nodes are up (stop() says nothing before); it is
        # registered before the loop and the cluster so that it stops after both, and
        # CostFinal counts until the nodes are gone.
        cost = CostMeter(Pricing(), bus.emit)
        stack.callback(cost.stop)
        thread = LoopThread(f"skyward-{request.name}")
        loop = thread.loop
        stack.callback(thread.stop)

        spec, cluster, started = _provision_first(request)
        interrupt.reassert()  # in front of the SIGTERM handler Ray's ray.init installs
        members = Members(cluster.nodes, cluster.infos)
        stack.callback(_stop_cluster, bus, cluster, members)
        duration = time.monotonic() - started
        count = len(cluster.infos)  # a provider may give more (sky.Ray: every alive node)
        closing.kept = bool(cluster.kept)
        bus.emit(ClusterProvisioned(request.name, count, duration, kept=cluster.kept))
        cost.reprice(cluster.pricing)
        cost.start()
        for phase in cluster.phases:
            bus.emit(BootstrapPhase(phase.name, phase.seconds, phase.node))
        for info, node in zip(cluster.infos, cluster.nodes):
            announce(bus, spec, info.node, node, duration)

        feed = EventFeed(bus.emit, lambda message: bus.emit(Error(message)), lambda: bus.wants(Metric))
        stack.callback(feed.stop)
        stack.callback(cluster.transport.close)  # also when opening it fails half-way
        cluster.transport.open(loop, feed)
        if cluster.kept and isinstance(cluster.transport, RelayTransport):  # for the pool daemon's dashboard
            stack.callback(ObservedForwarder(cluster.transport.observe, bus.on).close)
        nodes = spec.node_count
        driver = PoolDriver(
            cluster.transport, cluster.encode, options.resolved_worker, options.default_compute_timeout,
            bus.emit, bus.wants, feed.wait_delivered, loop,
            [info.node for info in cluster.infos], options.retry_on_interruption, nodes.ceiling,
            results_arrived=cluster.collections.results_arrived,
        )
        # The record is written once the pool is open (``OpenPool.ready``); forgetting it
        # is registered here so that it comes after the reconciler has stopped.
        stack.callback(registry.unregister, request.pool_id)
        reconciler = None
        if cluster.membership is not None:

            def reprice(handles: list[NodeHandle]) -> None:
                """The nodes changed: the cost meter and the registry follow them."""
                cost.reprice(pricing(handles))
                if is_open():
                    record(request, spec, logging, handles)

            hooks = Hooks(
                bus.emit, bus.wants, lambda rank, node, seconds: announce(bus, spec, rank, node, seconds),
                cluster.collections.membership_changed, reprice,
            )
            reconciler = Reconciler(
                request.name, nodes, options, driver, cluster.transport, cluster.membership, members, hooks, loop,
            )
            stack.callback(_reporting, bus, reconciler.stop, lambda exc: f"stopping the pool's membership: {exc}")
            reconciler.start()
        # Registered last, so closing starts with the driver refusing new work (work in
        # flight whose node then goes away ends with PoolClosedError).
        stack.callback(driver.close)
        return OpenPool(
            request, spec, loop, thread, cluster, feed, driver, members, reconciler, console, logging, cost,
            opened_at, stack.pop_all(), dashboard,
        )


class _Closing(Struct):
    """What a pool says when it closes: ``ClusterDestroyed``, which says whether the pool
    daemon keeps it (known once it is provisioned)."""

    bus: EventBus
    name: str
    opened_at: float
    kept: bool = False

    def destroyed(self) -> None:
        self.bus.emit(ClusterDestroyed(self.name, time.monotonic() - self.opened_at, kept=self.kept))


def _provision_first(request: Launch) -> tuple[Spec, LaunchedCluster, float]:
    """The first spec (in ``Options.selection`` order) whose cluster could be had, that
    cluster, and when its provisioning began (``time.monotonic()``)."""
    failures: list[tuple[Spec, BaseException]] = []
    for spec in selection.order(request.specs, request.options.selection):
        kept = request.launcher.daemon_held
        request.bus.emit(ClusterRequested(request.name, spec.provider.name, spec.node_count.desired, kept=kept))
        try:
            spec.provider.validate(spec, request.options)
            spec = with_default_storage(spec)
            started = time.monotonic()
            return spec, _provision(request, spec), started
        except TypeError:
            raise
        except Exception as exc:  # this spec cannot be had here: try the next one
            failures.append((spec, exc))
            request.bus.emit(Error(f"{spec.provider.name}: {exc}"))
    if len(failures) == 1:
        raise failures[0][1]
    unavailable = all(isinstance(error, NoAvailableProviderError) for _, error in failures)
    kind = NoAvailableProviderError if unavailable else AllProvidersFailedError
    what = "has a machine for them" if unavailable else "could be provisioned"
    failure = kind(f"none of the {len(failures)} Specs of pool {request.name} {what}")
    for index, (spec, error) in enumerate(failures, 1):
        failure.add_note(f"{index}. {spec.provider.name}: {type(error).__name__}: {error}")
    raise failure from failures[0][1]


def _provision(request: Launch, spec: Spec) -> LaunchedCluster:
    """``spec``'s cluster, trying up to ``Options.max_provision_attempts`` times with
    ``provision_retry_delay`` seconds between attempts when provisioning fails for a
    reason that may pass (no capacity, a network error). A ValueError (the spec
    cannot be satisfied) or NotImplementedError is not retried."""
    options = request.options
    attempts = options.max_provision_attempts or 1
    delay = options.provision_retry_delay or 0.0
    attempt = 1
    while True:
        try:
            return request.launcher.launch(spec, options, request.pool_id)
        except (ValueError, TypeError, NotImplementedError, NoAvailableProviderError):
            raise
        except Exception as exc:
            if attempt >= attempts:
                if attempts > 1:
                    exc.add_note(f"provisioning failed {attempts} times (Options.max_provision_attempts)")
                raise
            request.bus.emit(Error(f"{spec.provider.name}: attempt {attempt} of {attempts} failed: {exc}"))
            time.sleep(delay)
            attempt += 1


def announce(bus: EventBus, spec: Spec, rank: int, node: NodeHandle, duration: float) -> None:
    """A node is up: what it is, what it costs, how long it took."""
    priced = spec.provider.priced
    ondemand = node.ondemand_price if node.ondemand_price is not None else node.hourly_price
    bus.emit(InstanceProvisioned(
        rank, node.id, node.address, node.spot, spec.provider.name, node.instance_type,
        ondemand if priced else None, node.hourly_price if priced and node.spot else None,
    ))
    bus.emit(InstanceBootstrapped(rank, node.id, duration))


def record(request: Launch, spec: Spec, logging: log_setup.PoolLogging, nodes: Sequence[NodeHandle]) -> None:
    """List the pool and its nodes in the registry of open pools (``sky ls``, ``sky down``,
    ``sky logs``); a kept pool is listed by the pool daemon that holds it."""
    if request.launcher.daemon_held:
        return
    records = [registry.NodeRecord.of(node) for node in nodes]
    region = spec.region or getattr(spec.provider, "region", None)
    registry.register(
        request.pool_id, spec.provider.name, region, name=request.name, nodes=records, log_file=logging.pool_file
    )


def _stop_cluster(bus: EventBus, cluster: LaunchedCluster, members: Members) -> None:
    """Release the collections and stop the nodes (``LaunchedCluster.end``; an error is
    reported, not raised), then report each member gone."""
    try:
        cluster.end()
    except Exception as exc:  # report, keep tearing down
        bus.emit(Error(f"teardown: {exc}"))
    for rank in members.ranks():
        member = members.get(rank)
        if member is not None:
            bus.emit(InstanceDestroyed(rank, member.handle.id))


def _reporting(bus: EventBus, step: Callable[[], None], describe: Callable[[Exception], str]) -> None:
    """Run a closing step; an Exception it raises is reported as an ``Error`` event
    (``describe`` words it) and closing goes on."""
    try:
        step()
    except Exception as exc:  # report, keep tearing down
        bus.emit(Error(f"teardown: {describe(exc)}"))


def _plugin_exit(exc: Exception) -> str:
    return f"a plugin's around_client exit raised {type(exc).__name__}: {exc}"
