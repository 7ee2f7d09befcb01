"""A linearizability checker for histories of operations on the collections (a
Wing-Gong search with memoisation, as Knossos does it), and the models it checks them
against.

A history is a list of ``Op``: who did it (``process``), what (``name``, ``arg``), when
it was invoked and when its answer came back (``invoked``, ``completed``: the same clock
for every process, ``time.monotonic`` of one machine), and what it answered
(``result``). An operation whose outcome is unknown (its node was killed, its call timed
out) has ``completed=None``: it may have taken effect at any time after it was invoked,
or never, and its answer constrains nothing.

``linearizable(history, model)`` searches for an order of the operations that respects
real time (an operation that completed before another was invoked comes first) and in
which every answer is what ``model`` gives from its state; it returns None when one
exists, else the longest prefix of operations it could place and the operation that
could not follow it (the anomaly, for the test's message).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True, slots=True)
class Op:
    process: str
    name: str
    arg: object
    invoked: float
    completed: float | None
    result: object = None


Step = Callable[[Hashable, str, object], tuple[Hashable, object]]
"""``step(state, name, arg) -> (new state, the answer the model gives)``."""


@dataclass(frozen=True, slots=True)
class Model:
    initial: Hashable
    step: Step


def _register(state: Hashable, name: str, arg: object) -> tuple[Hashable, object]:
    if name == "write":
        return arg, None  # type: ignore[return-value]
    if name == "read":
        return state, state
    raise ValueError(f"a register has no {name!r}")


def _counter(state: Hashable, name: str, arg: object) -> tuple[Hashable, object]:
    assert isinstance(state, int)
    if name == "add":
        assert isinstance(arg, int)
        return state + arg, state + arg
    if name == "read":
        return state, state
    raise ValueError(f"a counter has no {name!r}")


REGISTER = Model(None, _register)
"""One key of a strong dict: ``write(v)`` answers None, ``read()`` the last value written
(None before any)."""
COUNTER = Model(0, _counter)
"""A strong counter: ``add(n)`` answers the new value, ``read()`` the value."""


@dataclass(frozen=True, slots=True)
class Violation:
    placed: tuple[Op, ...]
    stuck: tuple[Op, ...]
    """The operations none of which could come next after ``placed``."""

    def __str__(self) -> str:
        last = "; ".join(_shown(op) for op in self.placed[-5:])
        stuck = "; ".join(_shown(op) for op in self.stuck[:5])
        return f"not linearizable: after {len(self.placed)} operations (the last: {last}) none of these can come: {stuck}"


def _shown(op: Op) -> str:
    end = "?" if op.completed is None else f"{op.completed:.4f}"
    answer = "" if op.completed is None else f" -> {op.result!r}"
    return f"{op.process} {op.name}({op.arg!r}){answer} [{op.invoked:.4f}, {end}]"


def linearizable(history: Sequence[Op], model: Model, limit: int = 2_000_000) -> Violation | None:
    """None when ``history`` is linearizable for ``model`` (see the module), else the
    ``Violation`` of the deepest search. RuntimeError when the search takes more than
    ``limit`` steps (make the history smaller)."""
    ops = sorted(history, key=lambda op: op.invoked)
    ends = [math.inf if op.completed is None else op.completed for op in ops]
    must = frozenset(index for index, op in enumerate(ops) if op.completed is not None)
    seen: set[tuple[frozenset[int], Hashable]] = set()
    best: tuple[int, tuple[int, ...], tuple[int, ...]] = (-1, (), ())
    steps = 0

    def search(done: frozenset[int], order: tuple[int, ...], state: Hashable) -> bool:
        nonlocal best, steps
        if must <= done:
            return True
        key = (done, state)
        if key in seen:
            return False
        seen.add(key)
        steps += 1
        if steps > limit:
            raise RuntimeError(f"the search took more than {limit} steps: check a shorter history")
        open_ = [index for index in range(len(ops)) if index not in done]
        horizon = min(ends[index] for index in open_ if index in must) if must - done else math.inf
        candidates = [index for index in open_ if ops[index].invoked <= horizon]
        stuck = []
        for index in candidates:
            op = ops[index]
            after, answer = model.step(state, op.name, op.arg)
            if op.completed is not None and answer != op.result:
                stuck.append(index)
                continue
            if search(done | {index}, (*order, index), after):
                return True
        if len(order) > best[0]:
            best = (len(order), order, tuple(stuck))
        return False

    depth = sys.getrecursionlimit()
    sys.setrecursionlimit(max(depth, 2 * len(ops) + 1_000))  # one frame per operation placed
    try:
        if search(frozenset(), (), model.initial):
            return None
    finally:
        sys.setrecursionlimit(depth)
    return Violation(tuple(ops[index] for index in best[1]), tuple(ops[index] for index in best[2]))


def overlapping_holds(holds: Sequence[tuple[str, float, float]]) -> list[tuple[tuple[str, float, float], ...]]:
    """Pairs of lock holds ``(holder, acquired, released)`` whose times overlap: two
    holders at once (``acquired`` is when the acquire returned, ``released`` when the
    release was invoked, so an overlap is real, not an artefact of the calls' length)."""
    ordered = sorted(holds, key=lambda hold: hold[1])
    return [(a, b) for a, b in pairwise(ordered) if b[1] < a[2]]
