"""The IPC bridge: collections inside ``executor="process"`` children.

A child is not part of the Ray cluster, so its proxies use a ``ForwardingOperations`` (see
``gateway``) whose operations travel as ``("call", id, request)`` frames on the child's
pipe to its node agent. The agent's ``Gateway`` runs each and answers with a reply
frame: ``REPLY``, the call id in 8 bytes, then the encoded answer. The leading byte
tells answers from task frames (a cloudpickle frame never starts with it), and a reader
thread in the child routes them to the waiting call, so threads and coroutines of a
child can have several calls in flight.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

from skyward.collections.gateway import ForwardingOperations, Gateway, decode_answer, encode_operation

REPLY = b"\x00"
PIPE_CLOSED = "the node agent closed the pipe to this worker process"


class ChildBridge:
    """The child's end: reads every frame from the agent, hands task frames to
    ``next_frame`` and answers to the calls waiting for them."""

    def __init__(self, inbox: Connection, send: Callable[[str, int, bytes], None]) -> None:
        self._inbox = inbox
        self._send = send
        self._frames: queue.Queue[bytes | None] = queue.Queue()
        self._calls: dict[int, concurrent.futures.Future[object]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._read, name="skyward-bridge", daemon=True).start()

    def operations(self) -> ForwardingOperations:
        """This child's collection operations."""
        return ForwardingOperations(self.call, "the node agent")

    def next_frame(self) -> bytes | None:
        """The next frame for the child's main loop (pickled), or None once the agent
        closed the pipe. Waits while the child is idle."""
        return self._frames.get()

    def call(self, op: str, args: tuple[object, ...]) -> concurrent.futures.Future[object]:
        """Ask the agent to run operation ``op(*args)``; a Future of its result."""
        request = encode_operation(op, args)
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise ConnectionError(PIPE_CLOSED)
            call_id = next(self._ids)
            self._calls[call_id] = future
        try:
            self._send("call", call_id, request)
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
            future.set_exception(ConnectionError(PIPE_CLOSED))
        self._frames.put(None)

    def _answer(self, data: bytes) -> None:
        call_id = int.from_bytes(data[:8], "big")
        with self._lock:
            future = self._calls.pop(call_id, None)
        if future is None:
            return
        try:
            future.set_result(decode_answer(data[8:]))
        except BaseException as exc:  # the operation's error, or an answer that does not load
            future.set_exception(exc)


def serve(gateway: Gateway, call_id: int, request: bytes, write: Callable[[bytes], None]) -> None:
    """In an agent: run a child's operation and send the answer frame with ``write``."""
    gateway.submit(request, lambda answer: write(REPLY + call_id.to_bytes(8, "big") + answer))
