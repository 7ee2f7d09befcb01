"""A node's Outbox: order, long-poll wake-up, dropping past the cap, waking at close and resuming for the next client."""

from __future__ import annotations

import threading
import time

from skyward.node import outbox as outbox_module
from skyward.node.outbox import Outbox


def test_take_returns_events_in_order_with_the_count_put_so_far() -> None:
    box = Outbox()
    for n in range(3):
        box.put(n)
    assert box.take(0.0) == ([0, 1, 2], 0, 3)
    assert box.take(0.0) == ([], 0, 3)


def test_a_waiting_take_returns_as_soon_as_an_event_is_put() -> None:
    box = Outbox()
    threading.Timer(0.05, box.put, ("late",)).start()
    started = time.monotonic()
    events, _, _ = box.take(5.0)
    assert events == ["late"]
    assert time.monotonic() - started < 1.0


def test_past_the_cap_the_oldest_are_dropped_and_counted(monkeypatch) -> None:
    monkeypatch.setattr(outbox_module, "MAX_BUFFERED", 2)
    box = Outbox()
    for n in range(5):
        box.put(n)
    assert box.take(0.0) == ([3, 4], 3, 5)
    assert box.take(0.0)[1] == 0


def test_wake_ends_a_waiting_take_and_later_takes_do_not_wait() -> None:
    box = Outbox()
    threading.Timer(0.05, box.wake).start()
    started = time.monotonic()
    assert box.take(5.0) == ([], 0, 0)
    assert box.take(5.0) == ([], 0, 0)
    assert time.monotonic() - started < 1.0


def test_resume_after_wake_makes_takes_wait_again() -> None:
    box = Outbox()
    box.wake()
    assert box.take(5.0) == ([], 0, 0)
    box.resume()
    threading.Timer(0.3, box.put, ("next",)).start()
    started = time.monotonic()
    assert box.take(5.0) == (["next"], 0, 1)
    assert time.monotonic() - started >= 0.25
