"""The linearizability checker of tests/history.py on histories whose answer is known:
it accepts what a linearizable store may answer, and finds the anomalies a broken one
would show (a stale read served as strong, a lost increment, two lock holders)."""

from __future__ import annotations

import random

from history import COUNTER, REGISTER, Op, linearizable, overlapping_holds


def test_concurrent_writes_and_reads_in_either_order_are_accepted() -> None:
    history = [
        Op("a", "write", 1, 0.0, 2.0),
        Op("b", "write", 2, 1.0, 3.0),
        Op("c", "read", None, 2.5, 4.0, 1),  # b's write may come first, then a's
        Op("c", "read", None, 4.5, 5.0, 1),
    ]
    assert linearizable(history, REGISTER) is None


def test_a_stale_read_after_a_completed_write_is_found() -> None:
    history = [
        Op("a", "write", 1, 0.0, 1.0),
        Op("a", "write", 2, 1.5, 2.0),
        Op("b", "read", None, 3.0, 4.0, 1),  # served from a stale cache
    ]
    violation = linearizable(history, REGISTER)
    assert violation is not None and violation.stuck == (history[2],)
    assert "b read(None) -> 1" in str(violation)


def test_a_counter_answers_the_sum_and_a_lost_increment_is_found() -> None:
    good = [Op("a", "add", 1, 0.0, 1.0, 1), Op("b", "add", 1, 0.5, 1.5, 2), Op("c", "read", None, 2.0, 2.5, 2)]
    assert linearizable(good, COUNTER) is None
    lost = [*good[:2], Op("c", "read", None, 2.0, 2.5, 1)]
    assert linearizable(lost, COUNTER) is not None


def test_an_operation_of_unknown_outcome_may_have_happened_or_not() -> None:
    maybe = Op("a", "add", 5, 0.0, None)  # its node was killed
    assert linearizable([maybe, Op("b", "read", None, 1.0, 2.0, 5)], COUNTER) is None
    assert linearizable([maybe, Op("b", "read", None, 1.0, 2.0, 0)], COUNTER) is None
    assert linearizable([maybe, Op("b", "read", None, 1.0, 2.0, 3)], COUNTER) is not None


def test_a_random_sequential_history_with_jittered_times_is_accepted() -> None:
    rng = random.Random(7)
    value, history, now = 0, [], 0.0
    for step in range(300):
        process = f"p{step % 4}"
        if rng.random() < 0.5:
            value += 1
            history.append(Op(process, "add", 1, now, now + 0.5, value))
        else:
            history.append(Op(process, "read", None, now, now + 0.5, value))
        now += rng.uniform(0.1, 0.6)  # operations overlap their neighbours
    assert linearizable(history, COUNTER) is None


def test_two_holders_of_a_lock_at_once_are_found() -> None:
    assert overlapping_holds([("a", 0.0, 1.0), ("b", 1.1, 2.0), ("c", 2.5, 3.0)]) == []
    found = overlapping_holds([("a", 0.0, 1.0), ("b", 0.9, 2.0)])
    assert found == [(("a", 0.0, 1.0), ("b", 0.9, 2.0))]
