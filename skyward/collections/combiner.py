"""``Combiner``: a process's concurrent writes of one kind to one collection, sent to
the collection's host as one call.

A strong counter or a queue is served by one shard of its hosts, one call at a time, and each
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

A caller whose wait ends before its write was sent (its task stopped, or its deadline)
takes its write back. Once sent, a write's outcome is its call's: when the call fails,
each caller in it gets the host's error, or a TimeoutError saying the write may have been
applied when the call timed out or its sender was stopped. Whoever holds the turn hands
it on however it leaves, and a write whose turn has not come within ``SLICE`` (the
holder stuck: a call gives up sooner) takes one itself: two calls for one collection at
once are still each applied whole, so that costs batching, never correctness.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from skyward.collections.config import OP_TIMEOUT
from skyward.collections.steps import Steps, Wait

A = TypeVar("A")
R = TypeVar("R")

SLICE = OP_TIMEOUT
"""How long a waiting write waits before it looks again (a call gives up after as long)."""
SENT_SLICES = 3
"""How many slices a sent write waits for its call's answer (finding a host's actor
included)."""


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
    """One caller's write. ``answer`` is ``_LEAD`` once the write holds a turn to send
    (it then sends itself and no other sender takes it), else its answer or error."""

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
            return _unwrap((yield from self._send(host, name, [argument]))[0])
        key = (host, name)
        mine = _Write(argument)
        leads = False
        try:
            with self._lock:
                self._waiting.setdefault(key, []).append(mine)
                if key not in self._sending:
                    self._sending.add(key)
                    mine.answer.set_result(_LEAD)  # claimed: no other sender takes it into its call
                    leads = True
            answer = _LEAD if leads else (yield from self._wait(key, mine))
            if answer is not _LEAD:
                return cast(R, answer)
            return (yield from self._send_waiting(key, mine))
        finally:  # by state, not a local flag: an interrupt at any line above is covered
            self._leave(key, mine)

    def _wait(self, key: tuple[int, str], mine: _Write[A]) -> Steps[object]:
        """``mine``'s answer, or ``_LEAD`` once it is its turn to send. A write still unsent
        after a ``SLICE`` takes the turn itself: its holder is stuck or gone (a call gives
        up sooner), and two calls for one collection at once are still applied whole,
        each at one instant. A sent write waits ``SENT_SLICES`` for its call's answer."""
        what = f"{key[1]!r}.{self._what}"
        sent = 0
        while True:
            began = time.monotonic()
            try:
                return (yield Wait(mine.answer, SLICE, what))
            except TimeoutError:
                if time.monotonic() - began < SLICE:
                    raise  # not this wait's: the task's own deadline, raised into its thread
            with self._lock:
                unsent = mine in self._waiting.get(key, ())
                if unsent and not mine.answer.done():
                    mine.answer.set_result(_LEAD)  # claimed, as a turn handed on is
            if unsent:
                return _LEAD
            sent += 1
            if sent >= SENT_SLICES:
                raise TimeoutError(
                    f"{what}: the call that carried it got no answer within {SENT_SLICES * SLICE:g}s; "
                    "it may or may not have been applied"
                )

    def _send_waiting(self, key: tuple[int, str], mine: _Write[A]) -> Steps[R]:
        """Send ``mine`` and the writes waiting after it for ``key`` (at most ``most`` in
        all) as one call."""
        batch = [mine]
        try:
            with self._lock:
                waiting = self._waiting.get(key, [])
                others = [write for write in waiting if write is not mine and not write.answer.done()]
                claimed = [write for write in waiting if write is not mine and write.answer.done()]  # they send themselves
                most = len(others) + 1 if self._most is None else self._most
                batch = [mine, *others[:most - 1]]
                self._waiting[key] = claimed + others[most - 1:]  # last, and no call: nothing is lost in between
            answers = yield from self._send(key[0], key[1], [write.argument for write in batch])
        except BaseException as exc:
            for write in batch[1:]:
                if not write.answer.done():
                    write.answer.set_exception(self._their_error(key, exc))
            raise
        try:
            for write, answer in zip(batch[1:], answers[1:], strict=True):
                if isinstance(answer, Failed):
                    write.answer.set_exception(answer.error)
                else:
                    write.answer.set_result(answer)
        finally:  # an interrupt while handing the answers out leaves nobody waiting for one
            for write in batch[1:]:
                if not write.answer.done():
                    write.answer.set_exception(TimeoutError(
                        f"{key[1]!r}.{self._what}: applied, but its answer was lost: the task that sent it with "
                        "other writes was stopped while it handed the answers out"
                    ))
        return _unwrap(answers[0])

    def _their_error(self, key: tuple[int, str], error: BaseException) -> BaseException:
        """What the other writes of a call that raised ``error`` raise: the host's error as
        an object of their own; a timeout or a stop of the sender (Ctrl-C, a cancel, its
        task's deadline) as a TimeoutError saying the write may have been applied."""
        if isinstance(error, Exception) and not isinstance(error, (TimeoutError, concurrent.futures.CancelledError)):
            try:
                return copy.copy(error)
            except Exception:  # noqa: BLE001 - an error type that cannot be copied is shared
                return error
        fresh = TimeoutError(
            f"{key[1]!r}.{self._what}: sent in one call with other writes, whose sender got no answer or was "
            f"stopped ({type(error).__name__}); it may or may not have been applied"
        )
        fresh.__cause__ = error
        return fresh

    def _leave(self, key: tuple[int, str], mine: _Write[A]) -> None:
        """``mine``'s caller is leaving: take ``mine`` back if it is still unsent, and if
        it held a turn (its answer is ``_LEAD``), the first unclaimed waiting write gets it."""
        with self._lock:
            waiting = self._waiting.get(key, [])
            if mine in waiting:
                waiting.remove(mine)
            answer = mine.answer
            held = answer.done() and answer.exception() is None and answer.result() is _LEAD
            if not waiting:
                self._waiting.pop(key, None)
                if held:
                    self._sending.discard(key)
                return
            if held:
                first = next((write for write in waiting if not write.answer.done()), None)
                if first is not None:  # else every one waiting has claimed a turn and sends itself
                    first.answer.set_result(_LEAD)


def _unwrap(answer: R | Failed) -> R:
    """``answer``, or its write's error raised."""
    if isinstance(answer, Failed):
        raise answer.error
    return answer


def _on_event_loop() -> bool:
    """True on a thread that runs an asyncio event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
