"""``Pool``: the synchronous face of a running cluster.

A pool owns an asyncio loop on a daemon thread; every public method is synchronous and
bridges to that loop. Opening (``opening.launch``) provisions the nodes (trying each Spec
in selection order) and gives an ``OpenPool``, which the pool holds while it is open;
closing waits for work still in flight (up to ``Options.shutdown_timeout``) on a normal
exit, cancels it at once when the block exits with an exception (Ctrl-C included, and
SIGTERM, which raises KeyboardInterrupt while a pool is open: see ``interrupt``), and
then closes the ``OpenPool``, which stops every process the pool started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import uuid
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextvars import Token
from types import TracebackType
from typing import Any, Literal, NoReturn, TypeVar, cast, overload

from skyward.api import opening
from skyward.api.opening import Launch, OpenPool
from skyward.api.operands import DispatchOperand
from skyward.api.option_checks import check_nodes, check_options, check_resizable, with_keep_warm
from skyward.collections.config import DISABLED
from skyward.collections.factories import PoolCollections
from skyward.collections.operations import Operations
from skyward.core import context
from skyward.core.context import NESTED_DISPATCH, DispatchTarget
from skyward.core.errors import PoolClosedError
from skyward.core.frames import shows_users_frames
from skyward.core.function import PendingFunction, PendingFunctionGroup, SkywardFunction
from skyward.core.instance import current_task
from skyward.core.validation import check_flag, wait_limit
from skyward.engine import interruptible, stream_stop, streams, value_stream
from skyward.engine.driver import Again, PoolDriver
from skyward.engine.scheduler import ALL
from skyward.engine.value_stream import StreamRouter, ValueStream
from skyward.engine.window import ChunkWindow
from skyward.model.spec import Nodes, Options, Spec
from skyward.observe.bus import EventBus
from skyward.observe.events import Event
from skyward.observe.progress import ProgressTracker
from skyward.observe.progress_bar import progress_bar
from skyward.providers.base import Direct, Launcher

R = TypeVar("R")
T = TypeVar("T")
"""An item of ``pool.map``."""
E = TypeVar("E", bound=Event)

Target = int | Literal["head"] | None
"""Where ``pool.run(..., target=...)`` runs a call: None (any node), "head" or a rank."""

STREAM_WINDOW = 2
"""Chunks per task slot that a streamed map keeps in flight or waiting to be read."""
STOP_TIMEOUT = 30.0
"""How long a request to stop a closed stream's generator may take on its node."""


class Pool(PoolCollections, DispatchOperand):
    """A pool of nodes; use it as a context manager (``with sky.Compute(...) as pool``).

    ``pool.dict(name)``, ``pool.set``, ``pool.counter``, ``pool.queue``, ``pool.barrier``
    and ``pool.lock`` give the client the pool's distributed collections (see
    ``skyward.collections``)."""

    def __init__(
        self, specs: tuple[Spec, ...], options: Options, name: str | None = None, kept: bool = False
    ) -> None:
        if not specs:
            raise ValueError("a pool needs at least one Spec")
        options = with_keep_warm(specs, options)
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
        self._open: OpenPool | None = None
        """Everything the pool has while it is open (``opening``); None before and after."""
        self.spec: Spec | None = None
        """The Spec the pool opened with (the first that could be had); None until it opens."""
        self._activations: list[Token[DispatchTarget | None]] = []
        """The ``with`` statement's activations of this pool as ``>> sky``'s target."""
        self._progress = ProgressTracker(self._bus)
        self._futures: set[concurrent.futures.Future[Any]] = set()
        """Work in flight, of every result type (closing waits for it, or cancels it)."""
        self._streams = StreamRouter(self.on, self._stop_stream)

    # ----------------------------------------------------------------- lifecycle

    @shows_users_frames
    def __enter__(self) -> Pool:
        self.open()
        self._activations.append(context.activate(self))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        context.deactivate(self, self._activations.pop() if self._activations else None)
        self.close(cancel=exc_type is not None)

    def _launcher(self) -> Launcher:
        """How this pool has its cluster: held by the pool daemon when it is kept
        (``Options.keep_alive``), else launched here by its Spec's provider."""
        if self.options.keep_alive is None:
            return Direct()
        from skyward.providers.kept.client import Kept  # a kept pool's client alone (about 15 ms to import)

        return Kept(self.name, named=self._named, as_defined=self._kept)

    @shows_users_frames
    def open(self) -> Pool:
        """Provision the nodes and start the agents; blocks until the pool is ready."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"pool {self.name} was already opened; create a new one")
            self._state = "opening"
        request = Launch(self.specs, self.options, self.name, self.id, self._bus, self._launcher())
        try:
            running = opening.launch(request, lambda: self._state == "open")
        except BaseException:
            with self._lock:
                self._state = "closed"
            raise
        self.spec = running.spec
        with self._lock:
            closed_meanwhile = self._state != "opening"  # close() was called meanwhile
            self._open = running
            if not closed_meanwhile:
                self._state = "open"
        try:
            if closed_meanwhile:
                raise PoolClosedError(f"pool {self.name} was closed while it opened")
            running.ready(self)
        except BaseException:
            self._shut(running)
            raise
        return self

    def close(self, cancel: bool = False) -> None:
        """Stop everything the pool started. Work in flight is awaited for up to
        ``Options.shutdown_timeout`` seconds, or cancelled at once when ``cancel``."""
        with self._lock:
            if self._state in ("closing", "closed", "new"):
                self._state = "closed" if self._state == "new" else self._state
                return
            if self._state == "opening":  # open() closes what it opened, then raises
                self._state = "closing"
                return
            self._state = "closing"
            running = self._open
        pending = [f for f in list(self._futures) if not f.done()]
        if pending and not cancel:
            interruptible.wait(pending, timeout=wait_limit(self.options.shutdown_timeout))
        for future in pending:
            future.cancel()
        if running is not None:
            self._shut(running)

    def _shut(self, running: OpenPool) -> None:
        """Close the open pool (``OpenPool.close``: everything in reverse order of opening)."""
        try:
            running.close()
        finally:
            with self._lock:
                self._open, self._state = None, "closed"

    def _collections_operations(self) -> Operations:
        """The client's operations on this pool's collections (see ``PoolCollections``)."""
        running = self._open
        if running is None or self._state != "open":
            raise PoolClosedError(
                f"pool {self.name} is not open: use pool.dict() & co. inside `with sky.Compute(...) as pool:`"
            )
        if not self.options.collections_enabled:
            raise RuntimeError(DISABLED)
        return running.cluster.collections.operations()

    # ----------------------------------------------------------------- dispatch

    def _require_open(self) -> OpenPool:
        if current_task() is not None:
            raise RuntimeError(NESTED_DISPATCH)
        running = self._open
        if running is None or self._state != "open":
            raise PoolClosedError(
                f"pool {self.name} is not open: use it inside `with sky.Compute(...) as pool:`"
            )
        return running

    def _submit(self, make: Callable[[PoolDriver], Coroutine[object, object, R]]) -> concurrent.futures.Future[R]:
        running = self._require_open()
        future = interruptible.submit(make(running.driver), running.loop)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)
        return future

    def _wait(self, future: concurrent.futures.Future[R]) -> R:
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    @shows_users_frames
    def run(self, pending: PendingFunction[R], *, target: Target = None) -> R:
        """Run on one node and return the result (``pending >> pool``). ``target`` pins the
        node: "head" or a rank."""
        _check_pending(pending, ">>")
        running = self._require_open()
        if streams.is_generator(pending):
            return self._stream_call(pending, target)
        lost = 0
        if not running.on_loop_thread():
            result: R | Again = running.driver.run_now(pending, target)
            if not isinstance(result, Again):
                return result
            lost = result.lost
        value: R = self._wait(self._submit(lambda d: d.run(pending, target, lost)))
        return value

    def run_async(self, pending: PendingFunction[R], *, target: Target = None) -> concurrent.futures.Future[R]:
        """Start on one node and return a Future at once (``pending > pool``); for a
        generator function the Future already holds its stream of values."""
        _check_pending(pending, ">")
        if streams.is_generator(pending):
            return _resolved(self._stream_call(pending, target))
        future: concurrent.futures.Future[R] = self._submit(lambda d: d.run(pending, target))
        return future

    @shows_users_frames
    def broadcast(self, pending: PendingFunction[R]) -> list[R]:
        """Run on every node at once; results in node order (``pending @ pool``). For a
        generator function: one stream of values per node, in node order."""
        _check_pending(pending, "@")
        driver = self._require_open().driver
        if streams.is_generator(pending):
            ranks = driver.scheduler.ranks() or self._wait(self._submit(_nodes_present))
            return [self._stream_call(pending, rank) for rank in ranks]
        with self._progress.tasks("broadcast", pending.name, driver.nodes):
            results: list[R] = self._wait(self._submit(lambda d: d.broadcast(pending)))
            return results

    @shows_users_frames
    def run_parallel(self, group: PendingFunctionGroup) -> tuple[object, ...] | Iterator[object]:
        """Run a group in parallel: a tuple of results, or a generator when ``stream``.
        A generator function's place holds its stream of values (ready at once)."""
        if not isinstance(group, PendingFunctionGroup):
            raise TypeError(f"run_parallel() takes a group (a() & b(), or sky.gather(...)), got {group!r}")
        name = _group_name(group)
        bar = contextlib.ExitStack()
        bar.enter_context(progress_bar(self._bus, "gather", name, group.progress))
        try:
            futures = [self.run_async(p) for p in group.items]
            bar.callback(self._progress.futures("gather", name, futures))  # its last count, before the bar goes
        except BaseException:
            bar.close()
            raise
        if group.stream:
            stream = self._stream(futures, group.ordered, bar)
            weakref.finalize(stream, bar.close)  # a stream never read still takes its bar down
            return stream
        with bar:
            try:
                return tuple(future.result() for future in futures)
            except BaseException:
                _abandon(futures)
                raise

    def _stream(
        self, futures: list[concurrent.futures.Future[object]], ordered: bool, bar: contextlib.ExitStack
    ) -> Iterator[object]:
        """The results of ``futures`` as they are ready; ``bar`` is closed after the last
        (or when the caller stops reading)."""
        handed: set[int] = set()
        try:
            source = futures if ordered else interruptible.as_completed(futures)
            for future in source:
                result = future.result()
                handed.add(id(future))
                yield result
        finally:
            _abandon([future for future in futures if id(future) not in handed])
            bar.close()

    def _stream_call(self, pending: PendingFunction[R], target: Target) -> R:
        """Start a generator function's call on one node (``target`` as for ``run``): its
        values, as a stream the caller iterates as it would the generator."""
        node = self._require_open().driver.target_node(target)
        submit: value_stream.Submit = lambda call: self._submit(lambda d: d.run(call, node))
        stream = value_stream.start(pending, self._streams, submit, node)
        # R is the generator the function returns; the stream is iterated in its place
        return cast(R, stream)

    def _stop_stream(self, stream: str, node: int) -> None:
        """Ask ``node`` to stop the generator of ``stream`` (beside its tasks); returns at
        once and does nothing once the pool is closing."""
        running = self._open
        if running is None or self._state != "open":
            return
        request = PendingFunction(stream_stop.request_stop, (stream,), timeout=STOP_TIMEOUT)
        probe = running.driver.probe(request, node)
        try:
            asyncio.run_coroutine_threadsafe(probe, running.loop)
        except RuntimeError:  # the loop closed meanwhile
            probe.close()

    @overload
    def map(
        self, fn: SkywardFunction[R], items: Iterable[object], *, timeout: float | None = None,
        stream: Literal[False] = False, progress: bool = False,
    ) -> list[R]: ...

    @overload
    def map(
        self, fn: SkywardFunction[R], items: Iterable[object], *, timeout: float | None = None,
        stream: Literal[True], progress: bool = False,
    ) -> Iterator[R]: ...

    @overload
    def map(
        self, fn: Callable[[T], R], items: Iterable[T], *, timeout: float | None = None,
        stream: Literal[False] = False, progress: bool = False,
    ) -> list[R]: ...

    @overload
    def map(
        self, fn: Callable[[T], R], items: Iterable[T], *, timeout: float | None = None, stream: Literal[True],
        progress: bool = False,
    ) -> Iterator[R]: ...

    @overload
    def map(
        self, fn: SkywardFunction[R] | Callable[[T], R], items: Iterable[T], *, timeout: float | None = None,
        stream: bool, progress: bool = False,
    ) -> list[R] | Iterator[R]: ...

    @shows_users_frames
    def map(
        self, fn: SkywardFunction[R] | Callable[[T], R], items: Iterable[T], *, timeout: float | None = None,
        stream: bool = False, progress: bool = False,
    ) -> list[R] | Iterator[R]:
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

        ``progress=True`` draws a bar with the rate and the time left: on standard error
        in a terminal, in place in a notebook, nowhere in a pipe or a log file (and not
        twice: the live console panel, when up, draws it already).
        """
        pending = _as_pending(fn, timeout)
        check_flag("pool.map", "stream", stream)
        check_flag("pool.map", "progress", progress)
        values = _as_items(items)
        running = self._require_open()
        if stream:
            return self._map_stream(running, pending, values, progress)
        if not values:
            return []
        with (
            progress_bar(self._bus, "map", pending.name, progress),
            self._progress.tasks("map", pending.name, len(values)),
        ):
            results: list[R] = self._wait(self._submit(lambda d: d.map(pending, values)))
            return results

    def _map_stream(
        self, running: OpenPool, pending: PendingFunction[R], values: list[object], progress: bool
    ) -> Iterator[R]:
        """Yield results in input order as chunks arrive; a result is dropped here once
        yielded, and at most ``STREAM_WINDOW`` chunks per task slot are in flight or
        waiting to be read (the map waits for a slow reader)."""
        if not values:
            return
        driver = running.driver
        window = ChunkWindow(STREAM_WINDOW * driver.capacity, running.loop)
        arrived: queue.SimpleQueue[tuple[int, list[R]] | None] = queue.SimpleQueue()
        with (
            progress_bar(self._bus, "map", pending.name, progress),
            self._progress.tasks("map", pending.name, len(values)),
        ):
            future = self._submit(
                lambda d: d.map(pending, values, lambda start, chunk: arrived.put((start, chunk)), window)
            )
            future.add_done_callback(lambda _: arrived.put(None))
            early: dict[int, list[R]] = {}
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
        running = self._open
        return running.driver.nodes if running is not None else 0

    def resize(self, nodes: int | tuple[int, int] | Nodes) -> None:
        """Change the node count while the pool runs; returns at once (nodes join or
        leave in the background: watch ``current_nodes()`` or ``ClusterResized``).

        ``resize(n)`` sets ``desired`` to ``n`` and keeps ``min`` and ``max`` as they were
        (widened to include ``n``; unset, they follow ``n``, so a fixed pool stays fixed
        at ``n``). ``resize(sky.Nodes(...))`` or ``resize((low, high))`` replaces all
        three. Nodes leave from the highest rank, after their running tasks finish."""
        running = self._open
        if running is None or self._state != "open":
            raise PoolClosedError(f"pool {self.name} is not open: resize it inside `with sky.Compute(...) as pool:`")
        check_resizable(running.spec, "pool.resize()")
        reconciler = running.reconciler
        if reconciler is None:  # a cluster its provider made without a membership
            _resized(running.spec.node_count, nodes)  # a wrong argument is named first
            raise NotImplementedError(
                f"pool.resize(): pool {self.name} has a fixed size; open a new pool with the count you need"
            )
        reconciler.resize(_resized(reconciler.nodes, nodes))

    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]:
        """Call ``handler(event)`` for each event of ``event_type``; returns an unsubscribe function."""
        return self._bus.on(event_type, handler)

    # ----------------------------------------------------------------- old names

    def run_batch(self, group: PendingFunctionGroup) -> tuple[object, ...] | Iterator[object]:
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

    def _wrong_left(self, value: object, operator: str) -> TypeError:
        return _not_pending(value, operator)

    def __reduce__(self) -> tuple[type[DetachedPool], tuple[str]]:
        return (DetachedPool, (self.name,))

    def __repr__(self) -> str:
        return f"<Pool {self.name} {self._state} nodes={self.current_nodes()}>"


class DetachedPool:
    """What a pool becomes when a task captures it: any use says why it cannot work."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> NoReturn:
        if attribute.startswith("__"):  # pickle and copy probe for these: not there
            raise AttributeError(attribute)
        raise RuntimeError(NESTED_DISPATCH)

    def __rrshift__(self, other: object) -> NoReturn:
        raise RuntimeError(NESTED_DISPATCH)

    def __rmatmul__(self, other: object) -> NoReturn:
        raise RuntimeError(NESTED_DISPATCH)

    def __lt__(self, other: object) -> NoReturn:
        raise RuntimeError(NESTED_DISPATCH)


def _resized(current: Nodes, nodes: int | tuple[int, int] | Nodes) -> Nodes:
    """``pool.resize``'s argument as the pool's new ``Nodes`` (see ``Pool.resize``)."""
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        return Nodes.of(nodes)
    Nodes.of(nodes)  # validates the count
    low = None if current.min is None else min(current.min, nodes)
    high = None if current.max is None else max(current.max, nodes)
    return Nodes(desired=nodes, min=low, max=high)


def _raise_with_early(future: concurrent.futures.Future[list[R]], early: dict[int, list[R]]) -> None:
    """Raise a streamed map's error (if it failed), its ``partial_results`` being the
    finished results not yielded yet."""
    error = future.exception()
    if error is None:
        return
    partial = {start + offset: value for start, chunk in early.items() for offset, value in enumerate(chunk)}
    try:
        setattr(error, "partial_results", partial)  # noqa: B010  (an attribute the error class does not declare)
    except AttributeError:
        pass
    raise error


async def _nodes_present(driver: PoolDriver) -> list[int]:
    """The ranks of the nodes present, waiting until there is one (a pool with none yet)."""
    nodes: list[int] = await driver.scheduler.acquire(ALL)
    driver.scheduler.release(nodes)
    return nodes


def _resolved(value: R) -> concurrent.futures.Future[R]:
    """A Future that already holds ``value``."""
    future: concurrent.futures.Future[R] = concurrent.futures.Future()
    future.set_result(value)
    return future


def _abandon(futures: list[concurrent.futures.Future[object]]) -> None:
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


def _check_pending(pending: object, operator: str) -> None:
    if not isinstance(pending, PendingFunction):
        raise _not_pending(pending, operator)


def _not_pending(value: object, operator: str) -> TypeError:
    if isinstance(value, SkywardFunction):
        return TypeError(f"call the function first: `{value.__qualname__}(...) {operator} pool`")
    if isinstance(value, PendingFunctionGroup):
        return TypeError("a group runs with `>>` only: `(a() & b()) >> pool`")
    return TypeError(
        f"the left side of `{operator}` must be a pending call such as f(x) where f is decorated "
        f"with @sky.function; got {type(value).__name__} {value!r}"
    )


def _as_items(items: object) -> list[object]:
    """``pool.map``'s items as a list; TypeError naming the parameter for a non-iterable
    (a dict or a str is iterable and maps over its keys or characters, as ``map`` does)."""
    if not isinstance(items, Iterable):
        raise TypeError(
            f"pool.map(fn, items): items must be an iterable (a list, a range, a generator), "
            f"got {type(items).__name__} {items!r}"
        )
    return list(items)


def _as_pending(fn: SkywardFunction[R] | Callable[[T], R], timeout: float | None) -> PendingFunction[R]:
    if isinstance(fn, PendingFunction):
        raise TypeError("pool.map() takes the function itself, not a call: pool.map(f, items)")
    pending: PendingFunction[R]
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
