"""The IPC bridge: collections inside ``executor="process"`` children.

A child is not part of the Ray cluster, so its proxies use a ``ForwardingOperations`` (see
``gateway``) whose operations travel as ``Operation`` messages (``core.messages``) on the
child's pipe to its node agent. The agent's ``Gateway`` runs each and answers with an
``OperationAnswer`` on the pipe that also brings the child its tasks, and a reader thread
in the child routes answers to the waiting call and tasks to the main loop, so threads
and coroutines of a child can have several calls in flight.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

from skyward.collections.gateway import ForwardingOperations, Gateway, decode_answer, encode_operation
from skyward.core import messages
from skyward.core.codec import MalformedFrame, decode_message

PIPE_CLOSED = "the node agent closed the pipe to this worker process"


class ChildBridge:
    """The child's end: reads every frame from the agent, hands task frames to
    ``next_frame`` and answers to the calls waiting for them."""

    def __init__(self, inbox: Connection, send: Callable[[messages.FromWorker], None]) -> None:
        self._inbox = inbox
        self._send = send
        self._tasks: queue.Queue[messages.RunTask | None] = queue.Queue()
        self._calls: dict[int, concurrent.futures.Future[object]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._read, name="skyward-bridge", daemon=True).start()

    def operations(self) -> ForwardingOperations:
        """This child's collection operations."""
        return ForwardingOperations(self.call, "the node agent")

    def next_task(self) -> messages.RunTask | None:
        """The next task for the child's main loop, or None once the agent closed the pipe
        (or sent what is not a message to a worker). Waits while the child is idle."""
        return self._tasks.get()

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
            self._send(messages.Operation(call_id, request))
        except BaseException:
            with self._lock:
                self._calls.pop(call_id, None)
            raise
        return future

    def _read(self) -> None:
        while True:
            try:
                message = decode_message(self._inbox.recv_bytes())
            except (EOFError, OSError, MalformedFrame):
                break
            match message:
                case messages.OperationAnswer(call_id, answer):
                    self._answer(call_id, answer)
                case messages.RunTask():
                    self._tasks.put(message)
                case _:
                    break
        with self._lock:
            self._closed = True
            waiting, self._calls = self._calls, {}
        for future in waiting.values():
            future.set_exception(ConnectionError(PIPE_CLOSED))
        self._tasks.put(None)

    def _answer(self, call_id: int, data: bytes) -> None:
        with self._lock:
            future = self._calls.pop(call_id, None)
        if future is None:
            return
        try:
            future.set_result(decode_answer(data))
        except BaseException as exc:  # the operation's error, or an answer that does not load
            future.set_exception(exc)


def serve(gateway: Gateway, call_id: int, request: bytes, write: Callable[[messages.ToWorker], None]) -> None:
    """In an agent: run a child's operation and send its answer with ``write``."""
    gateway.submit(request, lambda answer: write(messages.OperationAnswer(call_id, answer)))
