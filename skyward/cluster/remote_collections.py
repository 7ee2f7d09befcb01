"""Collections from the client of a remote (SSH) pool, forwarded through the head agent.

The client of an SSH pool is not part of the Ray cluster, so ``pool.dict(...)`` & co.
get a ``RemoteEngine``: each engine operation becomes one
``("collection", id, op, args, wants)`` request on the stream to the head agent (see
``remote_protocol``), answered by a ``result`` like any other request. The proxies are
the same classes as everywhere else; only their engine differs (as with the
process-executor ``bridge``).

On the head agent a ``CollectionServer`` per client connection runs each operation with
the head agent's own ``LocalEngine`` on a thread of its own, so a waiting operation
(``queue.get``, ``lock.acquire``, ``barrier.wait``) blocks neither the stream nor the
other requests; its timeout is the engine's (cut in 1 s slices). A cancelled request
stops at its next slice. "eventual" operations use the head agent's node cache: for
the client, the head agent is its node.

Leases: the lock and barrier holders the client names (``client/<pid>/thread-<id>``)
are renamed on the head to holders of the head agent's process, one per client thread
and connection (``client/<head pid>/task-remote-<conn>-<pid>-thread-<id>``), so the head
agent keeps them alive while the connection lasts. When the connection ends (the
client closed the pool, was killed, or the tunnel broke) every holder of that
connection is ended at once: its locks are freed and the barriers it joined break, as
for a task that failed; if the head agent itself dies, the leases expire within 3.75 s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

from skyward.collections.bridge import OPERATION_PREFIXES
from skyward.collections.steps import Steps, Wait

COLLECTION_THREADS = 128
DRAIN_TIMEOUT = 8.0
"""How long a closing connection waits for its running operations (each stops within
one 1 s wait slice, or its host's answer) before ending its holders."""
_HOLDER_ARG = {"barrier_join": 2, "lock_acquire": 1, "lock_release": 1}
_connections = itertools.count()
_threads: concurrent.futures.ThreadPoolExecutor | None = None
_engines: dict[str, Any] = {}
_lock = threading.Lock()


class RemoteEngine:
    """The client's engine for an SSH pool: every ``LocalEngine`` operation, run by the
    head agent. ``call(op, args)`` sends one request and returns a Future of its result."""

    def __init__(self, call: Callable[[str, tuple[Any, ...]], concurrent.futures.Future[Any]]) -> None:
        self._call = call

    def __getattr__(self, op: str) -> Callable[..., Steps[Any]]:
        if not op.startswith(OPERATION_PREFIXES):
            raise AttributeError(op)
        return lambda *args: self._forward(op, args)

    def _forward(self, op: str, args: tuple[Any, ...]) -> Steps[Any]:
        return (yield Wait(self._call(op, args), None, f"{op} through the head agent"))


class CollectionServer:
    """On the head agent: serves one client connection's collection requests."""

    def __init__(self, config: Any) -> None:
        self._config = config
        self._conn = next(_connections)
        self._tasks: set[str] = set()
        self._running: dict[int, tuple[threading.Event, concurrent.futures.Future[Any]]] = {}

    async def handle(self, request_id: int, op: str, args: tuple[Any, ...]) -> Any:
        """Run ``op(*args)``; its result, or raises its error."""
        if not op.startswith(OPERATION_PREFIXES):
            raise ValueError(f"{op!r} is not a collection operation")
        if self._config is None:
            raise NotImplementedError("this cluster has no collections layout")
        if not self._config.enabled:
            from skyward.collections.config import DISABLED

            raise RuntimeError(DISABLED)
        slot = _HOLDER_ARG.get(op)
        if slot is not None:
            args = (*args[:slot], self._holder(args[slot]), *args[slot + 1:])
        stop = threading.Event()
        future = _pool().submit(_run, self._config, op, args, stop)
        self._running[request_id] = (stop, future)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            stop.set()
            raise
        finally:
            self._running.pop(request_id, None)

    def _holder(self, holder: str) -> str:
        node, pid, who = holder.split("/", 2)
        task = f"remote-{self._conn}-{pid}-{who}".replace("/", "-")
        self._tasks.add(task)
        return f"{node}/{os.getpid()}/task-{task}"

    async def close(self) -> None:
        """The connection ended: stop its operations, then end every holder it named
        (freeing its locks, breaking the barriers it joined)."""
        running = list(self._running.values())
        for stop, _ in running:
            stop.set()
        loop = asyncio.get_running_loop()
        if running:
            await loop.run_in_executor(
                None, lambda: concurrent.futures.wait([f for _, f in running], timeout=DRAIN_TIMEOUT)
            )
        engine = _engines.get(self._config.pool_id) if self._config is not None else None
        if self._tasks and engine is not None:
            tasks, self._tasks = self._tasks, set()
            for task in tasks:
                engine.end_task(task, False)


def _run(config: Any, op: str, args: tuple[Any, ...], stop: threading.Event) -> Any:
    from skyward.collections.steps import run

    return run(getattr(_head_engine(config), op)(*args), stop)


def _head_engine(config: Any) -> Any:
    with _lock:
        engine = _engines.get(config.pool_id)
        if engine is None:
            from skyward.collections.engine import LocalEngine

            engine = _engines[config.pool_id] = LocalEngine(config, "head")
        return engine


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _threads
    with _lock:
        if _threads is None:
            _threads = concurrent.futures.ThreadPoolExecutor(COLLECTION_THREADS, thread_name_prefix="skyward-remote-coll")
        return _threads
