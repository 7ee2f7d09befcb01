"""The combiner of a process's concurrent writes (``collections.combiner``): one call per
collection at a time, each caller answered as if its write had been applied alone."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import sys
import threading
import time
import types
from collections.abc import Callable

import pytest

from skyward.collections import combiner as combiner_module
from skyward.collections.combiner import Combiner, Failed
from skyward.collections.steps import Steps, Wait, run


class Host:
    """A counter's host: each call waits until the test lets it through (``gate``)."""

    def __init__(self, gated: bool = False) -> None:
        self.value = 0
        self.calls: list[int] = []
        self.gates: list[concurrent.futures.Future[None]] = []
        self.gated = gated
        self.fail: BaseException | None = None
        self._lock = threading.Lock()

    def send(self, host: int, name: str, amounts: list[int]) -> Steps[list[int | Failed]]:
        gate: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            self.calls.append(sum(amounts))
            self.gates.append(gate)
        if self.gated:
            yield Wait(gate, 10.0, "the test's gate")
        if self.fail is not None:
            raise self.fail
        answers: list[int | Failed] = []
        with self._lock:
            for amount in amounts:
                if amount < 0:
                    answers.append(Failed(ValueError(f"{amount} refused alone")))
                else:
                    self.value += amount
                    answers.append(self.value)
        return answers

    def combiner(self) -> Combiner[int, int]:
        return Combiner("increment", self.send)

    def open_next(self) -> None:
        deadline = time.monotonic() + 5
        while not any(not gate.done() for gate in self.gates):
            assert time.monotonic() < deadline, "no call came"
            time.sleep(0.005)
        next(gate for gate in self.gates if not gate.done()).set_result(None)


def _in_threads(combiner: Combiner[int, int], amounts: list[int]) -> list[concurrent.futures.Future[int]]:
    pool = concurrent.futures.ThreadPoolExecutor(len(amounts))
    futures = []
    for amount in amounts:
        futures.append(pool.submit(run, combiner.write(0, "c", amount)))
        time.sleep(0.05)  # in this order
    pool.shutdown(wait=False)
    return futures


def test_a_lone_increment_is_sent_at_once() -> None:
    host = Host()
    combiner = host.combiner()
    assert [run(combiner.write(0, "c", 1)) for _ in range(3)] == [1, 2, 3]
    assert host.calls == [1, 1, 1]


def test_increments_made_while_a_call_is_out_go_together_and_each_gets_its_own_value() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    futures = _in_threads(combiner, [1, 2, 3, 4])  # the first goes alone; the others wait for it
    assert host.calls == [1]
    host.open_next()
    assert futures[0].result(5) == 1
    host.open_next()
    assert [future.result(5) for future in futures[1:]] == [3, 6, 10]
    assert host.calls == [1, 9]
    host.gated = False
    assert run(combiner.write(0, "c", 5)) == 15  # the turn was handed back: a new caller sends alone


def test_counters_of_other_names_or_hosts_do_not_wait_for_each_other() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    pool = concurrent.futures.ThreadPoolExecutor(3)
    first = pool.submit(run, combiner.write(0, "a", 1))
    time.sleep(0.05)
    second = pool.submit(run, combiner.write(0, "b", 1))
    third = pool.submit(run, combiner.write(1, "a", 1))
    time.sleep(0.1)
    assert len(host.calls) == 3  # three calls out at once
    for _ in range(3):
        host.open_next()
    assert {first.result(5), second.result(5), third.result(5)} <= {1, 2, 3}
    pool.shutdown()


def test_an_error_of_the_call_reaches_every_increment_it_carried() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    futures = _in_threads(combiner, [1, 1, 1])
    host.fail = ConnectionError("the host is gone")
    host.open_next()
    host.open_next()
    for future in futures:
        with pytest.raises(ConnectionError, match="the host is gone"):
            future.result(5)
    host.fail, host.gated = None, False
    assert run(combiner.write(0, "c", 1)) == 1  # nothing was added; the next call goes out


def _a_held_write_between_two(combiner: Combiner[int, int]) -> tuple[
    concurrent.futures.Future[int], Steps[int], Wait, concurrent.futures.Future[int]
]:
    """A call out (1); a write of 100 that the test drives, queued behind it (its first
    wait); and a write of 10 queued after that."""
    pool = concurrent.futures.ThreadPoolExecutor(2)
    first = pool.submit(run, combiner.write(0, "c", 1))
    time.sleep(0.05)
    held = combiner.write(0, "c", 100)
    wait = next(held)
    third = pool.submit(run, combiner.write(0, "c", 10))
    time.sleep(0.05)
    pool.shutdown(wait=False)
    return first, held, wait, third


def test_a_caller_stopped_before_its_batch_went_takes_its_increment_back() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    first, stopped, _, third = _a_held_write_between_two(combiner)
    with pytest.raises(concurrent.futures.CancelledError):
        stopped.throw(concurrent.futures.CancelledError("stopped"))  # as ``run`` does once its stop is set
    host.open_next()
    host.open_next()
    assert (first.result(5), third.result(5)) == (1, 11)
    assert host.calls == [1, 10]


def test_a_caller_stopped_just_as_its_turn_came_passes_the_turn_on() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    first, waiting, wait, third = _a_held_write_between_two(combiner)
    host.open_next()
    assert first.result(5) == 1
    assert wait.target.result(5) is not None  # the turn to send is this caller's
    with pytest.raises(concurrent.futures.CancelledError):
        waiting.throw(concurrent.futures.CancelledError("stopped"))
    host.open_next()
    assert third.result(5) == 11
    assert host.calls == [1, 10]


def test_many_threads_each_get_a_value_no_other_got_and_the_total_is_exact() -> None:
    host = Host()
    combiner = host.combiner()
    threads, each = 16, 300
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        values = [v for part in pool.map(lambda _: [run(combiner.write(0, "c", 1)) for _ in range(each)], range(threads))
                  for v in part]
    assert sorted(values) == list(range(1, threads * each + 1))
    assert host.value == threads * each
    assert sum(host.calls) == threads * each


def test_a_write_refused_alone_fails_only_its_own_caller() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    futures = _in_threads(combiner, [1, 2, -5, 3])
    host.open_next()
    host.open_next()
    assert [futures[i].result(5) for i in (0, 1, 3)] == [1, 3, 6]
    with pytest.raises(ValueError, match="-5 refused alone"):
        futures[2].result(5)


def test_a_caller_on_an_event_loop_sends_alone_so_a_blocking_one_there_cannot_wait_on_its_own_loop() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    first = pool.submit(run, combiner.write(0, "c", 1))  # a call out for "c"
    time.sleep(0.05)

    async def on_a_loop() -> int:
        return run(combiner.write(0, "c", 2))  # blocking, inside a coroutine: not queued behind the first

    second = concurrent.futures.ThreadPoolExecutor(1).submit(asyncio.run, on_a_loop())
    time.sleep(0.1)
    assert host.calls == [1, 2]
    host.open_next()
    assert first.result(5) == 1
    host.open_next()
    assert second.result(5) == 3
    pool.shutdown()


def test_a_call_carries_at_most_its_limit_and_the_rest_go_next() -> None:
    host = Host(gated=True)
    combiner: Combiner[int, int] = Combiner("increment", host.send, most=2)
    futures = _in_threads(combiner, [1, 2, 3, 4, 5])
    for _ in range(3):
        host.open_next()
    assert [future.result(5) for future in futures] == [1, 3, 6, 10, 15]
    assert host.calls == [1, 5, 9]


def test_a_sender_stopped_by_ctrl_c_gives_the_others_a_timeout_not_its_interrupt() -> None:
    host = Host(gated=True)
    combiner = host.combiner()
    first = _in_threads(combiner, [1])  # the call out
    sender = combiner.write(0, "c", 2)
    turn = next(sender)  # queued behind it
    other = _in_threads(combiner, [3])  # queued too: it goes in the sender's call
    host.open_next()
    assert first[0].result(5) == 1
    sender.send(turn.target.result(5))  # the sender's turn: its call (2 + 3) is out
    assert host.calls == [1, 5]
    with pytest.raises(KeyboardInterrupt):
        sender.throw(KeyboardInterrupt())  # Ctrl-C in the sender's thread while it waits
    with pytest.raises(TimeoutError, match="may or may not have been applied"):
        other[0].result(5)


def test_a_write_whose_turn_does_not_come_within_a_slice_sends_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sender before it is stuck (its call unanswered): two calls for one collection
    at once are still each applied whole, so the waiting write goes on its own."""
    monkeypatch.setattr(combiner_module, "SLICE", 0.3)
    host = Host(gated=True)
    combiner = host.combiner()
    stuck = _in_threads(combiner, [1, 2])
    time.sleep(0.5)
    assert host.calls == [1, 2]  # the second went on its own after a slice
    host.gates[1].set_result(None)
    assert stuck[1].result(5) == 2
    host.gates[0].set_result(None)
    assert stuck[0].result(5) == 3
    host.gated = False
    assert run(combiner.write(0, "c", 4)) == 7  # the turn came back: a lone write goes at once
    assert host.calls == [1, 2, 4]


def test_a_sent_write_whose_call_never_answers_times_out_saying_it_may_have_been_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(combiner_module, "SLICE", 0.2)
    host = Host(gated=True)
    combiner = host.combiner()
    first = _in_threads(combiner, [1])
    sender = combiner.write(0, "c", 2)
    turn = next(sender)
    waiting = _in_threads(combiner, [3])
    host.open_next()
    assert first[0].result(5) == 1
    sender.send(turn.target.result(5))  # its call (2 + 3) is out, and stays unanswered
    with pytest.raises(TimeoutError, match="may or may not have been applied"):
        waiting[0].result(5)


def test_a_deadline_raised_into_a_writer_at_any_line_leaves_the_turn_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task's deadline is raised into its thread wherever it is (the thread executor's
    async TimeoutError). Wherever that lands in a waiting writer, no write is sent twice
    and the next lone write goes at once: no dead write holds the collection's turn."""
    monkeypatch.setattr(combiner_module, "SLICE", 2.0)
    lines = _lines_of(Combiner.write) + _lines_of(Combiner._send_waiting)
    leaving = _lines_of(Combiner.write, "self._leave(")
    for line in lines:
        host = Host(gated=True)
        combiner = host.combiner()
        holder = _in_threads(combiner, [1])
        interrupted = concurrent.futures.ThreadPoolExecutor(1).submit(_interrupted_at, line, combiner)
        time.sleep(0.1)  # queued behind the holder's call, or interrupted already
        host.gated = False
        host.gates[0].set_result(None)
        assert holder[0].result(5) >= 1
        with contextlib.suppress(TimeoutError):
            interrupted.result(5)
        began = time.monotonic()
        run(combiner.write(0, "c", 4))
        # in the line that hands the turn on, an interrupt can only be outlived: the next write takes it after a slice
        longest = 1.0 if line not in leaving else combiner_module.SLICE + 1.0
        assert time.monotonic() - began < longest, f"a write waited for a dead turn (deadline at line {line})"
        assert host.calls.count(2) + host.calls.count(6) <= 1, (line, host.calls)


def _lines_of(function: Callable[..., object], holding: str = "") -> list[tuple[str, int]]:
    """The lines of ``function`` that run (those holding ``holding`` only, if given)."""
    source, first = inspect.getsourcelines(function)
    return [(function.__name__, first + offset) for offset, text in enumerate(source)
            if text.strip() and not text.strip().startswith(("def ", '"""', "#")) and holding in text]


def _interrupted_at(where: tuple[str, int], combiner: Combiner[int, int]) -> int:
    """``combiner.write`` of 2 in this thread, with a TimeoutError raised at line ``where``
    of the function named there (once), as a task's deadline is."""
    name, line = where
    fired = False

    def local(frame: types.FrameType, event: str, _: object) -> object:
        nonlocal fired
        if event == "line" and not fired and frame.f_lineno == line:
            fired = True
            raise TimeoutError("the task's deadline")
        return local

    def calls(frame: types.FrameType, event: str, _: object) -> object:
        # this combiner's frames only: an earlier round's unfinished writer, finalized by
        # the collector in this thread, is not a writer the deadline lands in
        ours = frame.f_code.co_filename == combiner_module.__file__ and frame.f_locals.get("self") is combiner
        return local if frame.f_code.co_name == name and ours else None

    sys.settrace(calls)
    try:
        return run(combiner.write(0, "c", 2))
    finally:
        sys.settrace(None)
