"""``Combiner``: a process's concurrent writes of one kind to one collection, sent to
the collection's host as one call.

A strong counter or a queue is served by one host actor, one call at a time, and each
call costs the host about as much as a Ray actor call (group C2 of the benchmarks):
that, not the addition or the append, is what bounds a collection's writers. So while
one call for a collection is on its way, the writes that callers in this process (a
node's task threads, or the gateway threads serving its executor children) make to the
same collection wait, and the next call carries them all: a counter's increments as
their sum, a queue's items as one append of all, in the order they came. Each write
takes effect at the moment the host applies the call, between its caller's invocation
and its answer, so the collection stays linearizable; each caller gets its own answer
(an increment the value after the increments before it in the call and its own).
Alone, a caller sends at once, as without the combiner. A caller on a thread that runs
an asyncio event loop (an ``_async`` method, or a blocking call made inside a coroutine)
always sends alone: a blocking caller waiting there for a coroutine of its own loop to
send its call would wait forever.

A caller whose wait ends before its write was sent (its timeout, or its task stopped)
takes its write back. Once sent, a write's outcome is its call's: when the call fails,
every caller in it gets that error (the write may have been applied, as when a single
call times out).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from skyward.collections.config import OP_TIMEOUT
from skyward.collections.steps import Steps, Wait

A = TypeVar("A")
R = TypeVar("R")

WAITS = 2 * OP_TIMEOUT + 5.0
"""How long a caller waits for its answer: the call before its own and its own."""


@dataclass(frozen=True, slots=True)
class Failed:
    """One write of a call that failed alone (the others went through)."""

    error: Exception


Send = Callable[[int, str, list[A]], Steps[Sequence["R | Failed"]]]
"""Apply writes ``list[A]`` to collection ``name`` on host ``host`` in one call; each
write's answer, in order."""

_LEAD = object()
"""Handed to a waiting caller whose turn it is to send the next call."""


class _Write(Generic[A]):
    __slots__ = ("answer", "argument")

    def __init__(self, argument: A) -> None:
        self.argument = argument
        self.answer: concurrent.futures.Future[object] = concurrent.futures.Future()
        self.answer.set_running_or_notify_cancel()  # only the sender resolves it


class Combiner(Generic[A, R]):
    """Writes ``what`` of this process (for example ``"increment"``), one call per
    collection at a time, of at most ``most`` writes (None: any number)."""

    def __init__(self, what: str, send: Send[A, R], most: int | None = None) -> None:
        self._what = what
        self._send = send
        self._most = most
        self._lock = threading.Lock()
        self._waiting: dict[tuple[int, str], list[_Write[A]]] = {}
        self._sending: set[tuple[int, str]] = set()

    def write(self, host: int, name: str, argument: A) -> Steps[R]:
        """Apply ``argument`` to collection ``name`` on ``host``; its answer. Raises what
        the host's call raised."""
        if _on_event_loop():
            alone = (yield from self._send(host, name, [argument]))[0]
            if isinstance(alone, Failed):
                raise alone.error
            return alone
        key = (host, name)
        mine = _Write(argument)
        with self._lock:
            self._waiting.setdefault(key, []).append(mine)
            lead = key not in self._sending
            self._sending.add(key)
        if not lead:
            try:
                answer = yield Wait(mine.answer, WAITS, f"{name!r}.{self._what}")
            except BaseException:
                self._abandon(key, mine)
                raise
            if answer is not _LEAD:
                return cast(R, answer)
        return (yield from self._send_waiting(key, mine))

    def _send_waiting(self, key: tuple[int, str], mine: _Write[A]) -> Steps[R]:
        """Send the writes waiting for ``key`` (``mine`` first) as one call."""
        with self._lock:
            waiting = self._waiting.pop(key)
            most = len(waiting) if self._most is None else self._most
            batch, rest = waiting[:most], waiting[most:]
            if rest:
                self._waiting[key] = rest
        try:
            answers = yield from self._send(key[0], key[1], [write.argument for write in batch])
        except BaseException as exc:
            stopped = not isinstance(exc, Exception) or isinstance(exc, concurrent.futures.CancelledError)
            shared = exc if not stopped else TimeoutError(  # the sender's own stop (Ctrl-C, cancel) is not theirs
                f"{key[1]!r}.{self._what}: sent with other writes by a task that was stopped while it waited "
                "for the answer; it may or may not have been applied"
            )
            for write in batch:
                if write is not mine:
                    write.answer.set_exception(shared)
            raise
        finally:
            self._next(key)
        own: R | Failed = answers[0]
        for write, answer in zip(batch, answers, strict=True):
            if write is mine:
                own = answer
            elif isinstance(answer, Failed):
                write.answer.set_exception(answer.error)
            else:
                write.answer.set_result(answer)
        if isinstance(own, Failed):
            raise own.error
        return own

    def _next(self, key: tuple[int, str]) -> None:
        """The call for ``key`` ended: the first waiting caller sends the next one."""
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting:
                waiting[0].answer.set_result(_LEAD)
            else:
                self._sending.discard(key)

    def _abandon(self, key: tuple[int, str], mine: _Write[A]) -> None:
        """``mine``'s caller stopped waiting: take it back if it was not sent, and pass
        the turn on if it had just been handed the turn to send."""
        with self._lock:
            waiting = self._waiting.get(key, [])
            if mine not in waiting:
                return  # sent: its call's outcome is its own
            waiting.remove(mine)
            if not waiting:
                del self._waiting[key]
            lead = mine.answer.done() and mine.answer.result() is _LEAD
        if lead:
            self._next(key)


def _on_event_loop() -> bool:
    """True on a thread that runs an asyncio event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
