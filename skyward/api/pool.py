"""``Pool``: the synchronous face of a running cluster, and ``sky.Compute`` which opens one.

A pool owns an asyncio loop on a daemon thread; every public method is synchronous and
bridges to that loop. Opening provisions the nodes (trying each Spec in selection
order); closing waits for work still in flight (up to ``Options.shutdown_timeout``) on a
normal exit, cancels it at once when the block exits with an exception (Ctrl-C
included, and SIGTERM, which raises KeyboardInterrupt while a pool is open: see
``interrupt``), and stops every process the pool started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import Token
from typing import Any

from skyward.api import interrupt, selection
from skyward.api.option_checks import check_nodes, check_options, check_resizable
from skyward.collections.config import DISABLED
from skyward.collections.factories import PoolCollections
from skyward.core import context
from skyward.core.context import NESTED_DISPATCH
from skyward.core.errors import AllProvidersFailedError, NoAvailableProviderError, PoolClosedError
from skyward.core.function import PendingFunction, PendingFunctionGroup, SkywardFunction
from skyward.core.instance import current_task
from skyward.core.validation import check_flag, wait_limit
from skyward.engine import interruptible, stream_stop, streams, value_stream
from skyward.engine.driver import CHUNKS_PER_SLOT, Again, ClusterDriver
from skyward.engine.events import EventFeed
from skyward.engine.members import Members
from skyward.engine.reconciler import Hooks, Reconciler
from skyward.engine.scheduler import ALL
from skyward.engine.value_stream import StreamRouter, ValueStream
from skyward.engine.window import ChunkWindow
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Nodes, Options, Spec
from skyward.observe import log_setup
from skyward.observe.bus import EventBus
from skyward.observe.console import Console, open_console
from skyward.observe.cost import CostMeter
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
from skyward.observe.progress import ProgressTracker, guided_chunks
from skyward.plugins.client import ClientPlugins
from skyward.providers import registry
from skyward.providers.base import Cluster, pricing, with_default_storage
from skyward.providers.kept.client import open_kept

STREAM_WINDOW = 2
"""Chunks per task slot that a streamed map keeps in flight or waiting to be read."""
STOP_TIMEOUT = 30.0
"""How long a request to stop a closed stream's generator may take on its node."""


class Pool(PoolCollections):
    """A pool of nodes; use it as a context manager (``with sky.Compute(...) as pool``).

    ``pool.dict(name)``, ``pool.set``, ``pool.counter``, ``pool.queue``, ``pool.barrier``
    and ``pool.lock`` give the client the pool's distributed collections (see
    ``skyward.collections``)."""

    def __init__(
        self, specs: tuple[Spec, ...], options: Options, name: str | None = None, kept: bool = False
    ) -> None:
        if not specs:
            raise ValueError("a pool needs at least one Spec")
        check_options(specs, options)
        check_nodes(specs)
        self.specs = specs
        self.options = options
        self.name = name or f"pool-{uuid.uuid4().hex[:8]}"
        self._named = name is not None
        self._kept = kept
        """Adopt the kept pool ``name`` as it was defined (``Compute(name=...)`` of a kept pool)."""
        self.id = uuid.uuid4().hex
        self._bus = EventBus()
        self._state = "new"
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._cluster: Cluster | None = None
        self._driver: ClusterDriver | None = None
        self._reconciler: Reconciler | None = None
        self._members: Members | None = None
        self._feed: EventFeed | None = None
        self._console: Console | None = None
        self._logging: log_setup.LogSession | None = None
        self._cost: CostMeter | None = None
        self._progress = ProgressTracker(self._bus)
        self._token: Token[Any] | None = None
        self._futures: set[concurrent.futures.Future[Any]] = set()
        self._holds_sigterm = False
        self._opened_at = 0.0
        self.spec: Spec | None = None
        self._plugins = ClientPlugins()
        self._streams = StreamRouter(self.on)

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> Pool:
        self.open()
        self._token = context.activate(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        token, self._token = self._token, None
        context.deactivate(self, token)
        self.close(cancel=exc_type is not None)

    def open(self) -> Pool:
        """Provision the nodes and start the agents; blocks until the pool is ready."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"pool {self.name} was already opened; create a new one")
            self._state = "opening"
        self._opened_at = time.monotonic()
        self._holds_sigterm = interrupt.hold()
        self._logging = log_setup.install(self.options.logging, self._bus.on, self.id)
        self._console = open_console(self.options.console, self._bus.on)
        try:
            self._start_loop()
            self._launch()
        except BaseException:
            self._teardown()
            raise
        return self

    def close(self, cancel: bool = False) -> None:
        """Stop everything the pool started. Work in flight is awaited for up to
        ``Options.shutdown_timeout`` seconds, or cancelled at once when ``cancel``."""
        with self._lock:
            if self._state in ("closing", "closed", "new"):
                self._state = "closed" if self._state == "new" else self._state
                return
            self._state = "closing"
        pending = [f for f in list(self._futures) if not f.done()]
        if pending and not cancel:
            interruptible.wait(pending, timeout=wait_limit(self.options.shutdown_timeout))
        for future in pending:
            future.cancel()
        self._teardown()

    def _start_loop(self) -> None:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"skyward-{self.name}", daemon=True)
        thread.start()
        self._loop, self._loop_thread = loop, thread

    def _launch(self) -> None:
        """Provision the first spec that works (in ``Options.selection`` order); a spec
        this provider cannot satisfy (ValueError, NotImplementedError, a provisioning
        failure) falls through to the next. A single spec's error is raised as it is;
        when several all fail, AllProvidersFailedError lists each one's reason."""
        failures: list[tuple[Spec, BaseException]] = []
        for spec in self._ordered_specs():
            self._bus.emit(ClusterRequested(self.name, spec.provider.name, spec.node_count.desired))
            try:
                spec.provider.validate(spec, self.options)
                spec = with_default_storage(spec)
                started = time.monotonic()
                cluster = self._provision(spec)
            except TypeError:
                raise
            except Exception as exc:  # this spec cannot be had here: try the next one
                failures.append((spec, exc))
                self._bus.emit(Error(f"{spec.provider.name}: {exc}"))
                continue
            self.spec, self._cluster = spec, cluster
            self._start_driver(cluster, time.monotonic() - started)
            self._plugins.enter(self, spec, self.options.resolved_worker, cluster)
            return
        if len(failures) == 1:
            raise failures[0][1]
        unavailable = all(isinstance(error, NoAvailableProviderError) for _, error in failures)
        kind = NoAvailableProviderError if unavailable else AllProvidersFailedError
        what = "has a machine for them" if unavailable else "could be provisioned"
        failure = kind(f"none of the {len(failures)} Specs of pool {self.name} {what}")
        for index, (spec, error) in enumerate(failures, 1):
            failure.add_note(f"{index}. {spec.provider.name}: {type(error).__name__}: {error}")
        raise failure from failures[0][1]

    def _provision(self, spec: Spec) -> Cluster:
        """``spec``'s cluster, trying up to ``Options.max_provision_attempts`` times with
        ``provision_retry_delay`` seconds between attempts when provisioning fails for a
        reason that may pass (no capacity, a network error). A ValueError (the spec
        cannot be satisfied) or NotImplementedError is not retried."""
        attempts = self.options.max_provision_attempts or 1
        delay = self.options.provision_retry_delay or 0.0
        attempt = 1
        while True:
            try:
                if self.options.keep_alive is not None:  # the pool daemon holds it (docs/kept-pools.md)
                    return open_kept(spec, self.options, self.name, self._named, self._kept)
                return spec.provider.launch(spec, self.options, self.id)
            except (ValueError, TypeError, NotImplementedError, NoAvailableProviderError):
                raise
            except Exception as exc:
                if attempt >= attempts:
                    if attempts > 1:
                        exc.add_note(f"provisioning failed {attempts} times (Options.max_provision_attempts)")
                    raise
                self._bus.emit(Error(f"{spec.provider.name}: attempt {attempt} of {attempts} failed: {exc}"))
                time.sleep(delay)
                attempt += 1

    def _start_driver(self, cluster: Cluster, duration: float) -> None:
        """Report the nodes, then connect the one driver to the cluster's transport and,
        for a cluster that can change, start reconciling its nodes."""
        assert self._loop is not None and self.spec is not None
        count = len(cluster.infos)  # a provider may give more (sky.Ray: every alive node)
        self._bus.emit(ClusterProvisioned(self.name, count, duration))
        self._cost = CostMeter(cluster.pricing, self._bus.emit).start()
        for phase in cluster.phases:
            self._bus.emit(BootstrapPhase(phase.name, phase.seconds, phase.node))
        for info, node in zip(cluster.infos, cluster.nodes):
            self._announce(info.node, node, duration)
        self._feed = EventFeed(
            self._bus.emit, lambda message: self._bus.emit(Error(message)), lambda: self._bus.wants(Metric)
        )
        cluster.transport.open(self._loop, self._feed)
        nodes = self.spec.node_count
        self._driver = ClusterDriver(
            cluster.transport, cluster.encode, self.options.resolved_worker, self.options.default_compute_timeout,
            self._bus.emit, self._bus.wants, self._feed.wait_delivered, self._loop,
            [info.node for info in cluster.infos], self.options.retry_on_interruption, nodes.ceiling,
        )
        self._members = Members(cluster.nodes, cluster.infos)
        if cluster.membership is not None:
            hooks = Hooks(
                self._bus.emit, self._bus.wants, self._announce, cluster.collections.membership_changed, self._reprice
            )
            self._reconciler = Reconciler(
                self.name, nodes, self.options, self._driver, cluster.transport, cluster.membership, self._members,
                hooks, self._loop,
            )
            self._reconciler.start()
        with self._lock:
            self._state = "open"
        self._record(cluster.nodes)
        self._bus.emit(ClusterReady(self.name, count, time.monotonic() - self._opened_at))

    def _announce(self, rank: int, node: NodeHandle, duration: float) -> None:
        """A node is up: what it is, what it costs, how long it took."""
        assert self.spec is not None
        priced = self.spec.provider.priced
        ondemand = node.ondemand_price if node.ondemand_price is not None else node.hourly_price
        self._bus.emit(InstanceProvisioned(
            rank, node.id, node.address, node.spot, self.spec.provider.name, node.instance_type,
            ondemand if priced else None, node.hourly_price if priced and node.spot else None,
        ))
        self._bus.emit(InstanceBootstrapped(rank, node.id, duration))

    def _reprice(self, nodes: list[NodeHandle]) -> None:
        """The nodes changed: the cost meter and the registry follow them."""
        if self._cost is not None:
            self._cost.reprice(pricing(nodes))
        if self._state == "open":
            self._record(nodes)

    def _record(self, nodes: Sequence[NodeHandle]) -> None:
        """List the pool and its nodes in the registry of open pools (``sky ls``, ``sky down``,
        ``sky logs``); a kept pool is listed by the pool daemon that holds it."""
        assert self.spec is not None
        if self.options.keep_alive is not None:
            return
        records = [registry.NodeRecord(n.id, n.address, n.instance_type, n.hourly_price, n.spot) for n in nodes]
        region = self.spec.region or getattr(self.spec.provider, "region", None)
        log_file = self._logging.pool_file if self._logging is not None else None
        registry.register(self.id, self.spec.provider.name, region, name=self.name, nodes=records, log_file=log_file)

    def _ordered_specs(self) -> list[Spec]:
        return selection.order(self.specs, self.options.selection)

    def _teardown(self) -> None:
        try:
            self._plugins.close()
        except Exception as exc:  # report, keep tearing down
            self._bus.emit(Error(f"teardown: a plugin's around_client exit raised {type(exc).__name__}: {exc}"))
        if self._driver is not None:
            self._driver.close()
        if self._reconciler is not None:
            try:
                self._reconciler.stop()
            except Exception as exc:  # report, keep tearing down
                self._bus.emit(Error(f"teardown: stopping the pool's membership: {exc}"))
        registry.unregister(self.id)
        cluster = self._cluster
        if cluster is not None:
            cluster.transport.close()
        if self._feed is not None:
            self._feed.stop()
        if cluster is not None:
            try:
                cluster.collections.release()
                cluster.stop()
            except Exception as exc:  # report, keep tearing down
                self._bus.emit(Error(f"teardown: {exc}"))
            members = self._members
            ranks = members.ranks() if members is not None else []
            for rank in ranks:
                member = members.get(rank) if members is not None else None
                if member is not None:
                    self._bus.emit(InstanceDestroyed(rank, member.handle.id))
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=5)
            self._loop.close()
        if self._cost is not None:
            self._cost.stop()
        self._bus.emit(ClusterDestroyed(self.name, time.monotonic() - self._opened_at))
        if self._console is not None:
            self._console.close()
        if self._logging is not None:
            self._logging.close()
        self._cluster = self._driver = self._feed = self._reconciler = self._members = None
        if self._holds_sigterm:
            self._holds_sigterm = False
            interrupt.release()
        with self._lock:
            self._state = "closed"

    def _collections_engine(self) -> Any:
        """The client's engine for this pool's collections (see ``PoolCollections``)."""
        cluster = self._cluster
        if cluster is None or self._state != "open":
            raise PoolClosedError(
                f"pool {self.name} is not open: use pool.dict() & co. inside `with sky.Compute(...) as pool:`"
            )
        if not self.options.collections_enabled:
            raise RuntimeError(DISABLED)
        return cluster.collections.engine()

    # ----------------------------------------------------------------- dispatch

    def _require_driver(self) -> ClusterDriver:
        if current_task() is not None:
            raise RuntimeError(NESTED_DISPATCH)
        driver = self._driver
        if driver is None or self._state != "open" or self._loop is None:
            raise PoolClosedError(
                f"pool {self.name} is not open: use it inside `with sky.Compute(...) as pool:`"
            )
        return driver

    def _submit(self, make: Callable[[ClusterDriver], Any]) -> concurrent.futures.Future[Any]:
        driver = self._require_driver()
        assert self._loop is not None
        future = interruptible.submit(make(driver), self._loop)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)
        return future

    def _wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def run(self, pending: PendingFunction[Any], *, target: Any = None) -> Any:
        """Run on one node and return the result (``pending >> pool``). ``target`` pins the
        node: "head" or a rank."""
        _check_pending(pending, ">>")
        driver = self._require_driver()
        if streams.is_generator(pending):
            return self._stream_call(pending, target)
        lost = 0
        if not self._on_loop_thread():
            result = driver.run_now(pending, target)
            if not isinstance(result, Again):
                return result
            lost = result.lost
        return self._wait(self._submit(lambda d: d.run(pending, target, lost)))

    def _on_loop_thread(self) -> bool:
        return threading.current_thread() is self._loop_thread

    def run_async(self, pending: PendingFunction[Any], *, target: Any = None) -> concurrent.futures.Future[Any]:
        """Start on one node and return a Future at once (``pending > pool``); for a
        generator function the Future already holds its stream of values."""
        _check_pending(pending, ">")
        if streams.is_generator(pending):
            return _resolved(self._stream_call(pending, target))
        return self._submit(lambda d: d.run(pending, target))

    def broadcast(self, pending: PendingFunction[Any]) -> list[Any]:
        """Run on every node at once; results in node order (``pending @ pool``). For a
        generator function: one stream of values per node, in node order."""
        _check_pending(pending, "@")
        driver = self._require_driver()
        if streams.is_generator(pending):
            ranks = driver.scheduler.ranks() or self._wait(self._submit(_nodes_present))
            return [self._stream_call(pending, rank) for rank in ranks]
        with self._progress.tasks("broadcast", pending.name, driver.nodes):
            return self._wait(self._submit(lambda d: d.broadcast(pending)))

    def run_parallel(self, group: PendingFunctionGroup) -> Any:
        """Run a group in parallel: a tuple of results, or a generator when ``stream``.
        A generator function's place holds its stream of values (ready at once)."""
        if not isinstance(group, PendingFunctionGroup):
            raise TypeError(f"run_parallel() takes a group (a() & b(), or sky.gather(...)), got {group!r}")
        futures = [self.run_async(p) for p in group.items]
        self._progress.futures("gather", _group_name(group), futures)
        if group.stream:
            return self._stream(futures, group.ordered)
        try:
            return tuple(future.result() for future in futures)
        except BaseException:
            _abandon(futures)
            raise

    def _stream(self, futures: list[concurrent.futures.Future[Any]], ordered: bool) -> Iterator[Any]:
        handed: set[int] = set()
        try:
            source = futures if ordered else interruptible.as_completed(futures)
            for future in source:
                result = future.result()
                handed.add(id(future))
                yield result
        finally:
            _abandon([future for future in futures if id(future) not in handed])

    def _stream_call(self, pending: PendingFunction[Any], target: Any) -> ValueStream:
        """Start a generator function's call on one node (``target`` as for ``run``)."""
        node = self._require_driver().target_node(target)
        return value_stream.start(
            pending, self._streams, lambda call: self._submit(lambda d: d.run(call, node)), self._stop_stream, node
        )

    def _stop_stream(self, stream: str, node: int) -> None:
        """Ask ``node`` to stop the generator of ``stream`` (beside its tasks); returns at
        once and does nothing once the pool is closing."""
        driver, loop = self._driver, self._loop
        if driver is None or loop is None or self._state != "open":
            return
        request = PendingFunction(stream_stop.request_stop, (stream,), timeout=STOP_TIMEOUT)
        probe = driver.probe(request, node)
        try:
            asyncio.run_coroutine_threadsafe(probe, loop)
        except RuntimeError:  # the loop closed meanwhile
            probe.close()

    def map(
        self, fn: Callable[..., Any], items: Iterable[Any], *, timeout: float | None = None, stream: bool = False
    ) -> Any:
        """``[fn(x) for x in items]`` across the pool, results in input order.

        ``fn`` need not be decorated. Items travel in chunks sized automatically (big
        first, single items at the end), so 10,000 small items cost a few dozen round
        trips. ``timeout`` applies per item (default: the function's, else the pool's).
        ``stream=True`` returns a generator instead of a list: it starts the map when
        iterated and yields results in input order as soon as they are in, keeping only
        a bounded number of chunks in flight (memory does not grow with the map).

        When an item fails (its exception, a timeout, a crashed node), the error raised
        carries ``partial_results``, a dict of item index to result for every item that
        finished (when streaming: finished but not yielded yet), and ``failed_item``, the
        index of the failed item (for a crash of the agent process itself, the first
        unfinished item of the chunk it was running), or None.
        """
        pending = _as_pending(fn, timeout)
        check_flag("pool.map", "stream", stream)
        values = _as_items(items)
        driver = self._require_driver()
        if stream:
            return self._map_stream(driver, pending, values)
        if not values:
            return []
        with self._progress.tasks("map", pending.name, len(values), self._map_plan(driver, len(values))):
            return self._wait(self._submit(lambda d: d.map(pending, values)))

    def _map_plan(self, driver: ClusterDriver, count: int) -> Iterator[int]:
        return guided_chunks(count, driver.capacity, CHUNKS_PER_SLOT)

    def _map_stream(self, driver: ClusterDriver, pending: PendingFunction[Any], values: list[Any]) -> Iterator[Any]:
        """Yield results in input order as chunks arrive; a result is dropped here once
        yielded, and at most ``STREAM_WINDOW`` chunks per task slot are in flight or
        waiting to be read (the map waits for a slow reader)."""
        if not values:
            return
        assert self._loop is not None
        window = ChunkWindow(STREAM_WINDOW * driver.capacity, self._loop)
        arrived: queue.SimpleQueue[tuple[int, list[Any]] | None] = queue.SimpleQueue()
        with self._progress.tasks("map", pending.name, len(values), self._map_plan(driver, len(values))):
            future = self._submit(
                lambda d: d.map(pending, values, lambda start, chunk: arrived.put((start, chunk)), window)
            )
            future.add_done_callback(lambda _: arrived.put(None))
            early: dict[int, list[Any]] = {}
            position = 0
            try:
                while position < len(values):
                    while position not in early:
                        try:
                            entry = arrived.get(timeout=interruptible.SLICE)
                        except queue.Empty:
                            continue
                        if entry is None:
                            _raise_with_early(future, early)
                            continue
                        early[entry[0]] = entry[1]
                    chunk = early.pop(position)
                    position += len(chunk)
                    chunk.reverse()
                    while chunk:
                        yield chunk.pop()
                    window.release()
            finally:
                future.cancel()

    def current_nodes(self) -> int:
        """How many nodes take work right now (live: it follows nodes joining, leaving
        and being replaced)."""
        return self._driver.nodes if self._driver is not None else 0

    def resize(self, nodes: int | tuple[int, int] | Nodes) -> None:
        """Change the node count while the pool runs; returns at once (nodes join or
        leave in the background: watch ``current_nodes()`` or ``ClusterResized``).

        ``resize(n)`` sets ``desired`` to ``n`` and keeps ``min`` and ``max`` as they were
        (widened to include ``n``; unset, they follow ``n``, so a fixed pool stays fixed
        at ``n``). ``resize(sky.Nodes(...))`` or ``resize((low, high))`` replaces all
        three. Nodes leave from the highest rank, after their running tasks finish."""
        reconciler = self._reconciler
        if self._driver is None or self._state != "open" or self.spec is None:
            raise PoolClosedError(f"pool {self.name} is not open: resize it inside `with sky.Compute(...) as pool:`")
        check_resizable(self.spec, "pool.resize()")
        if reconciler is None:  # a kept pool: its nodes are the daemon's
            _resized(self.spec.node_count, nodes)  # a wrong argument is named first
            raise NotImplementedError(
                f"pool.resize(): the kept pool {self.name} has a fixed size (Options.keep_alive); "
                "open a new pool with the count you need"
            )
        reconciler.resize(_resized(reconciler.nodes, nodes))

    def on(self, event_type: type, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``handler(event)`` for each event of ``event_type``; returns an unsubscribe function."""
        return self._bus.on(event_type, handler)

    # ----------------------------------------------------------------- old names

    def run_batch(self, group: PendingFunctionGroup) -> Any:
        """Old name of ``run_parallel``."""
        return self.run_parallel(group)

    @property
    def is_active(self) -> bool:
        """True while the pool is open."""
        return self._state == "open"

    @property
    def instance_count(self) -> int:
        """Old name of ``current_nodes()``."""
        return self.current_nodes()

    # ----------------------------------------------------------------- operators

    def __rrshift__(self, other: Any) -> Any:
        raise _not_pending(other, ">>")

    def __rmatmul__(self, other: Any) -> Any:
        raise _not_pending(other, "@")

    def __lt__(self, other: Any) -> Any:
        raise _not_pending(other, ">")

    def __reduce__(self) -> Any:
        return (DetachedPool, (self.name,))

    def __repr__(self) -> str:
        return f"<Pool {self.name} {self._state} nodes={self.current_nodes()}>"


class DetachedPool:
    """What a pool becomes when a task captures it: any use says why it cannot work."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):  # pickle and copy probe for these: not there
            raise AttributeError(attribute)
        raise RuntimeError(NESTED_DISPATCH)

    def __rrshift__(self, other: Any) -> Any:
        raise RuntimeError(NESTED_DISPATCH)

    def __rmatmul__(self, other: Any) -> Any:
        raise RuntimeError(NESTED_DISPATCH)

    def __lt__(self, other: Any) -> Any:
        raise RuntimeError(NESTED_DISPATCH)


def _resized(current: Nodes, nodes: Any) -> Nodes:
    """``pool.resize``'s argument as the pool's new ``Nodes`` (see ``Pool.resize``)."""
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        return Nodes.of(nodes)
    Nodes.of(nodes)  # validates the count
    low = None if current.min is None else min(current.min, nodes)
    high = None if current.max is None else max(current.max, nodes)
    return Nodes(desired=nodes, min=low, max=high)


def _raise_with_early(future: concurrent.futures.Future[Any], early: dict[int, list[Any]]) -> None:
    """Raise a streamed map's error (if it failed), its ``partial_results`` being the
    finished results not yielded yet."""
    error = future.exception()
    if error is None:
        return
    try:
        error.partial_results = {  # type: ignore[attr-defined]
            start + offset: value for start, chunk in early.items() for offset, value in enumerate(chunk)
        }
    except AttributeError:
        pass
    raise error


async def _nodes_present(driver: ClusterDriver) -> list[int]:
    """The ranks of the nodes present, waiting until there is one (a pool with none yet)."""
    nodes: list[int] = await driver.scheduler.acquire(ALL)
    driver.scheduler.release(nodes)
    return nodes


def _resolved(value: Any) -> concurrent.futures.Future[Any]:
    """A Future that already holds ``value``."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


def _abandon(futures: list[concurrent.futures.Future[Any]]) -> None:
    """Cancel the group's work nobody will read: calls not done, and streams not handed out."""
    for future in futures:
        if future.cancel() or not future.done() or future.exception() is not None:
            continue  # cancelled, still running, or failed: nothing to close
        result = future.result()
        if isinstance(result, ValueStream):
            result.close()


def _group_name(group: PendingFunctionGroup) -> str:
    names = list(dict.fromkeys(item.name for item in group.items))
    return names[0] if len(names) == 1 else f"{len(names)} functions"


def _check_pending(pending: Any, operator: str) -> None:
    if not isinstance(pending, PendingFunction):
        raise _not_pending(pending, operator)


def _not_pending(value: Any, operator: str) -> TypeError:
    if isinstance(value, SkywardFunction):
        return TypeError(f"call the function first: `{value.__qualname__}(...) {operator} pool`")
    if isinstance(value, PendingFunctionGroup):
        return TypeError("a group runs with `>>` only: `(a() & b()) >> pool`")
    return TypeError(
        f"the left side of `{operator}` must be a pending call such as f(x) where f is decorated "
        f"with @sky.function; got {type(value).__name__} {value!r}"
    )


def _as_items(items: Any) -> list[Any]:
    """``pool.map``'s items as a list; TypeError naming the parameter for a non-iterable
    (a dict or a str is iterable and maps over its keys or characters, as ``map`` does)."""
    if not isinstance(items, Iterable):
        raise TypeError(
            f"pool.map(fn, items): items must be an iterable (a list, a range, a generator), "
            f"got {type(items).__name__} {items!r}"
        )
    return list(items)


def _as_pending(fn: Callable[..., Any], timeout: float | None) -> PendingFunction[Any]:
    if isinstance(fn, PendingFunction):
        raise TypeError("pool.map() takes the function itself, not a call: pool.map(f, items)")
    if isinstance(fn, SkywardFunction):
        pending = fn()
    elif callable(fn):
        pending = PendingFunction(fn)
    else:
        raise TypeError(f"pool.map() needs a function, got {type(fn).__name__} {fn!r}")
    if streams.is_generator(pending):
        name = pending.name
        raise TypeError(
            f"pool.map({name}, items): {name} is a generator function and map needs a plain one. "
            f"Stream one call's values with `for value in {name}(x) >> pool`, or one stream per "
            f"item with `sky.gather(*({name}(x) for x in items)) >> pool`."
        )
    return pending.with_timeout(timeout) if timeout is not None else pending
