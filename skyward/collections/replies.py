"""Strong calls applied once, however many copies of them a host gets.

A process numbers its strong calls (``Tickets``). Each call carries a ``Ticket``: the
caller's name, the call's number and the lowest number the caller still waits on, as a
line ahead of its request (``with_ticket``; a second argument of the actor call would
cost Ray about 0.15 ms a call). When the host cannot be reached just now (a reset
connection, a partition), the process sends the same call again under the same ticket,
and the host (``Replies``) keeps each answer until the caller has it: a copy that comes
while the first still runs waits for it (a queue ``get``, a lock ``acquire``), one that
comes after gets the first's answer, and one whose answer the caller has already taken
is refused. So a partition delays a strong increment or put and never applies it twice.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from skyward.collections.errors import CollectionUnavailableError
from skyward.collections.markers import BUSY
from skyward.collections.remote import Outcome, Ticket

COPY_WAIT = 60.0
"""How long a copy waits for the first copy of its call to finish on the host (that
one's own wait is a slice of a second, or a prepared update's 30 s)."""
FORGET_AFTER = 300.0
"""A caller not heard from for this long is forgotten (a copy is sent again for 60 s
at most)."""


def with_ticket(ticket: Ticket, request: bytes) -> bytes:
    """``request`` headed by ``ticket`` (the caller's name holds no newline)."""
    caller, number, below = ticket
    return b"%d %d %s\n" % (number, below, caller.encode()) + request


def ticketed(data: bytes) -> tuple[Ticket, memoryview]:
    """The ticket and the request of ``with_ticket``'s bytes; ValueError when ``data``
    has no ticket line."""
    end = data.index(b"\n")
    number, below, caller = data[:end].split(b" ", 2)
    return (caller.decode(), int(number), int(below)), memoryview(data)[end + 1:]


class Tickets:
    """The numbering of one process's strong calls; thread-safe."""

    def __init__(self, caller: str) -> None:
        self._caller = caller
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, None] = {}  # numbers in order of issue, so the first is the lowest

    def issue(self) -> int:
        """The number of a new call, waited on until ``settle``."""
        with self._lock:
            number = self._next
            self._next += 1
            self._waiting[number] = None
            return number

    def ticket(self, number: int) -> Ticket:
        """The ticket to send call ``number`` (or a copy of it) with."""
        with self._lock:
            return self._caller, number, next(iter(self._waiting), self._next)

    def settle(self, number: int) -> None:
        """Call ``number`` is over for this process (answered, failed or given up)."""
        with self._lock:
            self._waiting.pop(number, None)


@dataclass(slots=True)
class _Caller:
    below: int = 0
    """Every call numbered under this was answered to the caller: its answer is dropped."""
    answers: dict[int, Outcome | None] = field(default_factory=dict)
    """Outcome per call number; None while its first copy runs."""
    seen: float = 0.0


class Replies:
    """A host's answers to strong calls, per caller, kept until the caller has them. Every
    method is called with the host's lock (``lock``) held."""

    def __init__(self, lock: threading.Lock) -> None:
        self._done = threading.Condition(lock)
        self._callers: dict[str, _Caller] = {}

    def admit(self, ticket: Ticket, can_wait: bool) -> Outcome | None:
        """None when the call is new: apply it, then ``record`` its outcome. Otherwise
        the outcome to answer this copy with: its first copy's (waited for when that one
        still runs and ``can_wait``; BUSY when it runs and this copy may not wait, so
        that it is sent to the wait group), or an error when the caller already had it."""
        name, number, below = ticket
        caller = self._callers.get(name)
        if caller is None:
            caller = self._callers[name] = _Caller()
        caller.seen = time.monotonic()
        if below > caller.below:
            caller.below = below
            dropped = [done for done in caller.answers if done < below]
            for done in dropped:
                del caller.answers[done]
            if dropped:
                self._done.notify_all()  # a copy waiting for one of them is refused
        if number < caller.below:
            return False, _taken()
        if number not in caller.answers:
            caller.answers[number] = None
            return None
        if caller.answers[number] is None and not can_wait:
            return False, BUSY

        def over() -> bool:
            return caller.answers.get(number) is not None or number not in caller.answers

        if not self._done.wait_for(over, COPY_WAIT):
            raise TimeoutError(f"the first copy of this call ran for over {COPY_WAIT:g}s on its host")
        outcome = caller.answers.get(number)
        return (False, _taken()) if outcome is None else outcome

    def record(self, ticket: Ticket, outcome: Outcome) -> None:
        """The outcome of the call ``admit`` let through; BUSY (nothing applied) forgets
        it, so that its copy to the wait group runs it."""
        name, number, _ = ticket
        caller = self._callers.get(name)
        if caller is None or number < caller.below:
            return
        if outcome[1] is BUSY:
            del caller.answers[number]
        else:
            caller.answers[number] = outcome
            self._done.notify_all()

    def forget_idle(self) -> None:
        """Drop the callers not heard from for ``FORGET_AFTER`` seconds."""
        now = time.monotonic()
        for name in [name for name, caller in self._callers.items() if now - caller.seen > FORGET_AFTER]:
            del self._callers[name]


def _taken() -> CollectionUnavailableError:
    return CollectionUnavailableError(
        "a copy of this collection call came to its host after the caller had taken its answer; "
        "it was not applied again"
    )
