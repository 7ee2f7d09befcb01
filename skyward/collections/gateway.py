"""Collections for processes outside the Ray cluster, served by a node agent.

An executor child (``Worker(executor="process")``) and the client of a remote pool are
not Ray drivers, so their proxies get a ``ForwardingOperations``: each operation is
encoded as a ``CollectionCall`` (the operation by name, its arguments pickled) and sent
to a node agent, which runs it with its own ``LocalOperations`` (and so its node's
cache) through a ``Gateway`` and answers with an encoded ``CollectionResult``. The
proxies are the same classes as everywhere else; only their operations differ. The
child reaches its agent over its pipe (``bridge``); a remote client reaches the head
node's agent through the head relay, which forwards the bytes unopened.

Each operation runs on a thread of its own, so a waiting one (``queue.get``,
``lock.acquire``, ``barrier.wait``) blocks nothing else; it can be stopped (``cancel``),
which ends it within one wait slice.

Remote clients hold locks and join barriers as holders of the agent's own process, one
per client thread (``<node>/<agent pid>/task-client-<client>-<pid>-thread-<id>``), so
the agent keeps their leases alive while the client is connected. When the client goes
away (it closed the pool, was killed, or its connection broke) ``end_client`` stops its
operations and ends every holder it named: its locks are freed and the barriers it
joined break, as for a task that failed; if the agent itself dies, the leases expire
within 3.75 s.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import cloudpickle

from skyward.collections.operations import Operations
from skyward.collections.steps import Steps, Wait
from skyward.core.codec import MalformedFrame, decode_message, encode_message, load_payload
from skyward.core.messages import CollectionCall, CollectionResult
from skyward.core.validation import shown

OPERATION_PREFIXES = ("dict_", "set_", "counter_", "queue_", "barrier_", "lock_", "pool_")
OPERATIONS = frozenset(name for name in vars(Operations) if name.startswith(OPERATION_PREFIXES))
"""The operations a gateway runs: the methods of ``operations.Operations``."""
GATEWAY_THREADS = 128
DRAIN_TIMEOUT = 8.0
"""How long an ending client waits for its running operations (each stops within one
1 s wait slice, or its host's answer) before its holders are ended."""
_HOLDER_ARG = {"barrier_join": 2, "lock_acquire": 1, "lock_release": 1}

Forward = Callable[[str, tuple[object, ...]], concurrent.futures.Future[object]]
"""``forward(op, args)``: send operation ``op(*args)``; a Future of its result."""


@runtime_checkable
class EndsTasks(Protocol):
    """Operations that can end a task's holders (a ``LocalOperations``)."""

    def end_task(self, task_id: str, ok: bool) -> None: ...


class ForwardingOperations:
    """Every ``LocalOperations`` operation, run by a node agent: ``forward(op, args)`` sends
    one operation and returns a Future of its result. ``where`` names the way in errors."""

    def __init__(self, forward: Forward, where: str) -> None:
        self._forward_op = forward
        self._where = where

    def __getattr__(self, op: str) -> Callable[..., Steps[Any]]:
        """Operation ``op`` (see ``operations.Operations``); its result is whatever the
        agent's operations returned for it."""
        if op not in OPERATIONS:
            raise AttributeError(op)
        return lambda *args: self._forward(op, args)

    def _forward(self, op: str, args: tuple[object, ...]) -> Steps[object]:
        return (yield Wait(self._forward_op(op, args), None, f"{op} through {self._where}"))


FRESH_AT = {"dict_get": 3, "dict_contains": 3, "set_contains": 3, "counter_get": 2}
"""The eventual reads of ``LocalOperations``, by the position of their ``fresh`` argument."""


def fresh_read(op: str, args: tuple[object, ...]) -> tuple[object, ...]:
    """``args`` of ``op`` asking the owner, when ``op`` is an eventual read; else as they are."""
    at = FRESH_AT.get(op)
    if at is None or len(args) < at:
        return args
    return (*args[:at], True)


def encode_operation(op: str, args: tuple[object, ...], dumps: Callable[[object], bytes] = cloudpickle.dumps) -> bytes:
    """The bytes of one forwarded operation (an encoded ``CollectionCall``: ``op`` by name,
    ``args`` pickled); TypeError naming the collection, the operation and the argument
    that cannot be pickled."""
    try:
        arguments = dumps(args)
    except Exception as exc:
        kind, _, method = op.partition("_")
        what = f"sky.{kind}({args[0]!r}).{method}" if args and isinstance(args[0], str) else op
        culprit = _unpicklable(args[1:], dumps)
        raise TypeError(
            f"{what}({shown(culprit)}): it ({type(culprit).__name__}) cannot be pickled to send to the pool "
            f"({type(exc).__name__}: {exc}); use a str, int, bytes or tuple key and a picklable value"
        ) from None
    return encode_message(CollectionCall(op, arguments))


def _unpicklable(args: tuple[object, ...], dumps: Callable[[object], bytes]) -> object:
    """The first of ``args`` (within a list of (key, value) pairs, the first key or
    value) that ``dumps`` refuses; ``args`` itself if each alone is accepted."""
    for arg in args:
        for part in [item for pair in arg for item in pair] if isinstance(arg, list) else [arg]:
            try:
                dumps(part)
            except Exception:
                return part
    return args


def decode_answer(data: bytes) -> object:
    """The result in a gateway's answer (an encoded ``CollectionResult``), or raises its
    error; ``MalformedFrame`` when ``data`` is not one."""
    result = decode_message(data)
    if not isinstance(result, CollectionResult):
        raise MalformedFrame(f"a collection operation was answered with a {type(result).__name__}")
    value = load_payload(result.value)  # from the gateway the operation was sent to
    if result.ok:
        return value
    raise value


def encode_answer(ok: bool, value: object) -> bytes:
    """A gateway's answer, encoded: ``value`` pickled (an error that cannot be pickled
    becomes a TypeError saying so)."""
    try:
        pickled = cloudpickle.dumps(value)
    except Exception as exc:
        problem = TypeError(f"the {'answer' if ok else 'error'} cannot be pickled to send back: {exc}")
        ok, pickled = False, cloudpickle.dumps(problem)
    return encode_message(CollectionResult(ok, pickled))


class Gateway:
    """In a node agent: runs forwarded operations with ``operations()``, the node's operations."""

    def __init__(self, operations: Callable[[], Operations], node: int) -> None:
        self._operations = operations
        self._node = node
        self._lock = threading.Lock()
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._running: dict[str, dict[int, tuple[threading.Event, concurrent.futures.Future[None]]]] = {}
        self._holders: dict[str, set[str]] = {}

    def submit(self, request: bytes, reply: Callable[[bytes], None], client: str = "", call_id: int = 0) -> None:
        """Run one encoded operation on a gateway thread and hand the encoded answer to
        ``reply``. ``client`` names a remote client (empty for an executor child)."""
        stop = threading.Event()
        with self._lock:
            future = self._pool().submit(self._serve, request, reply, client, stop)
            if client:
                self._running.setdefault(client, {})[call_id] = (stop, future)
        if client:
            future.add_done_callback(lambda _: self._finished(client, call_id))

    def run(self, request: bytes, client: str, call_id: int) -> bytes:
        """``submit`` and wait for its answer (for a caller that has a thread to spare)."""
        answer: concurrent.futures.Future[bytes] = concurrent.futures.Future()
        self.submit(request, answer.set_result, client, call_id)
        return answer.result()

    def cancel(self, client: str, call_id: int) -> None:
        """Stop ``client``'s operation ``call_id`` at its next wait slice."""
        with self._lock:
            running = self._running.get(client, {}).get(call_id)
        if running is not None:
            running[0].set()

    def end_client(self, client: str) -> None:
        """``client`` is gone: stop its operations, then end every holder it named."""
        with self._lock:
            running = list(self._running.pop(client, {}).values())
            holders = self._holders.pop(client, set())
        for stop, _ in running:
            stop.set()
        concurrent.futures.wait([future for _, future in running], timeout=DRAIN_TIMEOUT)
        if holders:
            operations = self._operations()
            if not isinstance(operations, EndsTasks):
                raise TypeError(f"the gateway's operations {operations!r} cannot end the tasks of client {client}")
            for task in holders:
                operations.end_task(task, False)

    def _finished(self, client: str, call_id: int) -> None:
        with self._lock:
            self._running.get(client, {}).pop(call_id, None)

    def _serve(self, request: bytes, reply: Callable[[bytes], None], client: str, stop: threading.Event) -> None:
        from skyward.collections.steps import run

        try:
            call = decode_message(request)
            if not isinstance(call, CollectionCall) or call.operation not in OPERATIONS:
                raise ValueError(f"{shown(call)} is not a collection operation")
            args = load_payload(call.arguments)  # from this agent's child or an authenticated client
            if not isinstance(args, tuple):
                raise TypeError(f"the arguments of {call.operation} are a {type(args).__name__}, not a tuple")
            if client:
                args = self._as_client_holder(call.operation, args, client)
            data = encode_answer(True, run(getattr(self._operations(), call.operation)(*args), stop))
        except BaseException as exc:  # sent back to the caller, raised there
            data = encode_answer(False, exc)
        try:
            reply(data)
        except OSError:  # the caller is gone; nobody waits for the answer
            pass
        except Exception as exc:  # noqa: BLE001 - the answer could not be framed: the caller is told, not left waiting
            problem = RuntimeError(f"the answer of this collection operation could not be sent back: {exc}")
            with contextlib.suppress(Exception):
                reply(encode_answer(False, problem))

    def _as_client_holder(self, op: str, args: tuple[object, ...], client: str) -> tuple[object, ...]:
        slot = _HOLDER_ARG.get(op)
        if slot is None:
            return args
        _, pid, who = str(args[slot]).split("/", 2)
        task = f"client-{client}-{pid}-{who}".replace("/", "-")
        with self._lock:
            self._holders.setdefault(client, set()).add(task)
        return (*args[:slot], f"{self._node}/{os.getpid()}/task-{task}", *args[slot + 1:])

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._threads is None:
            self._threads = concurrent.futures.ThreadPoolExecutor(GATEWAY_THREADS, thread_name_prefix="skyward-gateway")
        return self._threads
