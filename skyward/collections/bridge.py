"""The IPC bridge: collections inside ``executor="process"`` children.

A child is not part of the Ray cluster, so its proxies use a ``BridgeEngine``: each
operation becomes a ``("call", id, op, args)`` frame on the child's pipe to its node
agent, which runs it with the agent's own ``LocalEngine`` (and so the node's cache) on a
bridge thread and answers with a reply frame: ``REPLY``, the call id in 8 bytes, then the
pickled ``(ok, value)``. The leading byte tells answers from task frames (a cloudpickle
frame never starts with it), and a reader thread
in the child routes them to the waiting call, so threads and coroutines of a child can
have several calls in flight. The proxies are the same classes as everywhere else.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle

from skyward.collections.steps import Steps, Wait

REPLY = b"\x00"
BRIDGE_THREADS = 64
OPERATION_PREFIXES = ("dict_", "set_", "counter_", "queue_", "barrier_", "lock_")

_threads: concurrent.futures.ThreadPoolExecutor | None = None
_threads_lock = threading.Lock()


class ChildBridge:
    """The child's end: reads every frame from the agent, hands task frames to
    ``next_frame`` and answers to the calls waiting for them."""

    def __init__(self, inbox: Connection, send: Callable[..., None]) -> None:
        self._inbox = inbox
        self._send = send
        self._frames: queue.Queue[bytes | None] = queue.Queue()
        self._calls: dict[int, concurrent.futures.Future[Any]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._read, name="skyward-bridge", daemon=True).start()

    def next_frame(self) -> bytes | None:
        """The next frame for the child's main loop (pickled), or None once the agent
        closed the pipe. Waits while the child is idle."""
        return self._frames.get()

    def call(self, op: str, args: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        """Ask the agent to run engine operation ``op(*args)``; a Future of its result."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise ConnectionError("the node agent closed the pipe to this worker process")
            call_id = next(self._ids)
            self._calls[call_id] = future
        try:
            self._send("call", call_id, op, args)
        except BaseException:
            with self._lock:
                self._calls.pop(call_id, None)
            raise
        return future

    def _read(self) -> None:
        while True:
            try:
                data = self._inbox.recv_bytes()
            except (EOFError, OSError):
                break
            if data[:1] == REPLY:
                self._answer(data[1:])
            else:
                self._frames.put(data)
        with self._lock:
            self._closed = True
            waiting, self._calls = self._calls, {}
        for future in waiting.values():
            future.set_exception(ConnectionError("the node agent closed the pipe to this worker process"))
        self._frames.put(None)

    def _answer(self, data: bytes) -> None:
        call_id = int.from_bytes(data[:8], "big")
        with self._lock:
            future = self._calls.pop(call_id, None)
        if future is None:
            return
        try:
            ok, value = cloudpickle.loads(data[8:])
        except Exception as exc:  # an answer this process cannot unpickle fails its call
            ok, value = False, exc
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class BridgeEngine:
    """The child's engine: every operation of ``LocalEngine``, run by the node agent."""

    def __init__(self, bridge: ChildBridge) -> None:
        self._bridge = bridge

    def __getattr__(self, op: str) -> Callable[..., Steps[Any]]:
        if not op.startswith(OPERATION_PREFIXES):
            raise AttributeError(op)
        return lambda *args: self._forward(op, args)

    def _forward(self, op: str, args: tuple[Any, ...]) -> Steps[Any]:
        return (yield Wait(self._bridge.call(op, args), None, f"{op} through the node agent"))


def serve(call: tuple[Any, ...], reply: Callable[[bytes], None]) -> None:
    """In an agent: run a child's ``(call_id, op, args)`` on a bridge thread and send the
    answer frame with ``reply``."""
    _bridge_threads().submit(_serve, call, reply)


def _serve(call: tuple[Any, ...], reply: Callable[[bytes], None]) -> None:
    from skyward.collections import runtime
    from skyward.collections.steps import run

    call_id, op, args = call
    try:
        if not op.startswith(OPERATION_PREFIXES):
            raise ValueError(f"{op!r} is not a collection operation")
        answer: tuple[bool, Any] = (True, run(getattr(runtime.node_engine(), op)(*args)))
    except BaseException as exc:  # sent back to the child, raised there
        answer = (False, exc)
    try:
        data = cloudpickle.dumps(answer)
    except Exception as exc:
        data = cloudpickle.dumps((False, TypeError(f"the answer to {op} cannot be pickled: {exc}")))
    try:
        reply(REPLY + call_id.to_bytes(8, "big") + data)
    except OSError:  # the child is gone; nobody waits for the answer
        pass


def _bridge_threads() -> concurrent.futures.ThreadPoolExecutor:
    global _threads
    with _threads_lock:
        if _threads is None:
            _threads = concurrent.futures.ThreadPoolExecutor(BRIDGE_THREADS, thread_name_prefix="skyward-bridge")
        return _threads
