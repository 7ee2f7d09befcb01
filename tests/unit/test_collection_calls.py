"""Forwarded collection operations are typed messages (``messages.CollectionCall`` and
``CollectionResult`` through ``core.codec``): the operation travels by name and is checked
before its arguments, the user's payload, are unpickled; an answer that is not a
``CollectionResult`` is refused. A ``Gateway`` with a dict standing in for its node's
operations runs them."""

from __future__ import annotations

import concurrent.futures
import pickle
from collections.abc import Iterator

import cloudpickle
import pytest

from skyward.collections.gateway import OPERATIONS, Gateway, decode_answer, encode_answer, encode_operation
from skyward.collections.steps import Steps
from skyward.core.codec import MalformedFrame, decode_message, encode_message
from skyward.core.messages import CollectionCall, CollectionResult

UNPICKLED: list[str] = []


class Planted:
    """Unpickling it runs code: it records that it was unpickled."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return UNPICKLED.append, ("planted",)


class Counting:
    """Stands in for a node's operations: ``counter_add`` keeps a count."""

    def __init__(self) -> None:
        self.count = 0

    def counter_add(self, name: str, n: int, consistency: str) -> Steps[int]:
        self.count += n
        return self.count
        yield  # a generator of no steps


@pytest.fixture
def gateway() -> Iterator[tuple[Gateway, Counting]]:
    operations = Counting()
    yield Gateway(lambda: operations, 0), operations  # type: ignore[arg-type, return-value]


def test_an_operation_travels_by_name_with_its_arguments_pickled() -> None:
    call = decode_message(encode_operation("counter_add", ("c", 2, "strong")))
    assert call == CollectionCall("counter_add", cloudpickle.dumps(("c", 2, "strong")))
    assert "counter_add" in OPERATIONS and "dict_get" in OPERATIONS and "__init__" not in OPERATIONS


def test_the_gateway_runs_a_call_and_answers_with_a_typed_result(gateway: tuple[Gateway, Counting]) -> None:
    running, operations = gateway
    answer = running.run(encode_operation("counter_add", ("c", 5, "strong")), "", 1)
    assert isinstance(decode_message(answer), CollectionResult)
    assert decode_answer(answer) == 5 and operations.count == 5


def test_an_unknown_operation_is_refused_before_its_arguments_are_unpickled(
    gateway: tuple[Gateway, Counting],
) -> None:
    running, _ = gateway
    UNPICKLED.clear()
    for name in ("__class__", "system", "counter_add_everything"):
        answer = running.run(encode_message(CollectionCall(name, pickle.dumps((Planted(),)))), "", 1)
        with pytest.raises(ValueError, match="is not a collection operation"):
            decode_answer(answer)
    assert UNPICKLED == []


def test_a_pickle_where_a_call_should_be_is_refused_unopened(gateway: tuple[Gateway, Counting]) -> None:
    running, _ = gateway
    UNPICKLED.clear()
    answer = running.run(pickle.dumps(("counter_add", (Planted(),))), "", 1)
    with pytest.raises(MalformedFrame, match="not a message"):
        decode_answer(answer)
    assert UNPICKLED == []


def test_an_answer_that_is_not_a_result_is_refused() -> None:
    with pytest.raises(MalformedFrame):
        decode_answer(pickle.dumps((True, 1)))
    with pytest.raises(MalformedFrame, match="answered with a CollectionCall"):
        decode_answer(encode_operation("counter_get", ("c",)))


def test_an_error_comes_back_raised_and_an_unpicklable_one_says_so() -> None:
    with pytest.raises(KeyError, match="k"):
        decode_answer(encode_answer(False, KeyError("k")))

    class Local(Exception):
        def __reduce__(self) -> object:
            raise TypeError("no")

    with pytest.raises(TypeError, match="the error cannot be pickled to send back"):
        decode_answer(encode_answer(False, Local("x")))


def test_an_answer_that_cannot_be_framed_is_replaced_by_an_error_not_lost(gateway: tuple[Gateway, Counting]) -> None:
    """A reply that fails for another reason than a gone caller (an answer too large
    for a frame) does not end the gateway's thread with the caller left waiting."""
    running, _ = gateway
    answers: concurrent.futures.Future[bytes] = concurrent.futures.Future()

    def reply(data: bytes) -> None:
        if decode_message(data) == CollectionResult(True, cloudpickle.dumps(3)):
            raise ValueError("bin size exceeds the frame's limit")
        answers.set_result(data)

    running.submit(encode_operation("counter_add", ("c", 3, "strong")), reply)
    with pytest.raises(RuntimeError, match="could not be sent back: bin size exceeds"):
        decode_answer(answers.result(5))
