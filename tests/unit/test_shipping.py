"""Functions shipped by value go to a node once (skyward/engine/shipping.py): the second
request to the same node carries a reference, and a pickle is reused only while every
object it was made of is still the same, so a rebound global, a closure cell set again or
a redefined helper is shipped afresh, and a value that can change in place is never kept.
The functions are made in a module the nodes cannot import (as a script's are); "the
node" is this process's store of received functions."""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyward.engine import shipping
from skyward.engine.shipping import ShippedFunctionMissing, ShippedFunctions
from skyward.engine.wire import decode, decode_request, encode

SCRIPT = '''
import math
SCALE = 3
ITEMS = [1, 2]
COUNT = 0

def scaled(x):
    return math.floor(x) * SCALE

def helper(x):
    return x + SCALE

def calls_helper(x: list[int]) -> int:
    return helper(x[0])

def counts_items():
    return len(ITEMS)

def writes_a_global():
    global COUNT
    COUNT += 1
    return COUNT

def make_closure(step):
    def add(x):
        return x + step
    return add
'''


@pytest.fixture
def script() -> types.SimpleNamespace:
    """A fresh "script": functions of a module no node can import (cloudpickle ships them by value)."""
    namespace: dict[str, object] = {"__name__": "a_script_the_nodes_lack"}
    exec(compile(SCRIPT, "a_script.py", "exec"), namespace)  # noqa: S102 - the test makes a script's functions
    return types.SimpleNamespace(**namespace)


@pytest.fixture(autouse=True)
def empty_node() -> Iterator[None]:
    shipping._received.clear()
    yield
    shipping._received.clear()


def sent(fn: object, functions: ShippedFunctions, node: int = 0) -> bytes:
    payload = encode(fn, functions.shipment(node))
    assert isinstance(payload, bytes)
    return payload


def test_the_second_request_to_a_node_carries_a_reference_that_runs_the_same(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    first = sent(script.scaled, functions)
    again = sent(script.scaled, functions)
    assert len(again) < len(first) / 3, (len(first), len(again))
    assert decode(first)(2.5) == 6
    assert decode(again)(2.5) == 6
    assert decode(again) is decode(first), "the node rebuilds the function once"
    other_node = sent(script.scaled, functions, node=1)
    assert len(other_node) == len(first), "another node is sent the function in full"


def test_a_rebound_global_ships_the_function_afresh(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    assert decode(sent(script.scaled, functions))(2) == 6
    script.scaled.__globals__["SCALE"] = 4
    assert decode(sent(script.scaled, functions))(2) == 8


def test_a_rebound_global_of_a_helper_ships_the_caller_afresh(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    assert decode(sent(script.calls_helper, functions))([1]) == 4
    script.calls_helper.__globals__["SCALE"] = 10
    assert decode(sent(script.calls_helper, functions))([1]) == 11


def test_a_closure_cell_set_again_ships_the_function_afresh(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    add = script.make_closure(1)
    assert decode(sent(add, functions))(1) == 2
    add.__closure__[0].cell_contents = 5
    assert decode(sent(add, functions))(1) == 6


@pytest.mark.parametrize("name", ["counts_items", "writes_a_global"])
def test_a_function_reading_a_mutable_value_or_writing_a_global_is_never_kept(
    script: types.SimpleNamespace, name: str,
) -> None:
    functions = ShippedFunctions()
    fn = getattr(script, name)
    first = sent(fn, functions)
    assert functions.kept(fn, lambda _: b"") is None
    assert len(sent(fn, functions)) == len(first)
    assert not shipping._received
    if name == "counts_items":
        script.ITEMS.append(3)
        assert decode(sent(fn, functions))() == 3, "a change in place is seen"
    else:
        assert [decode(sent(fn, functions))() for _ in range(2)] == [1, 1], "each call starts from the client's value"


def test_a_node_without_the_function_says_so_and_forgetting_it_sends_it_in_full(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    decode(sent(script.scaled, functions))
    reference = sent(script.scaled, functions)
    shipping._received.clear()  # the node's agent was replaced
    with pytest.raises(ShippedFunctionMissing, match="does not hold the function"):
        decode(reference)
    functions.forget(0)
    assert decode(sent(script.scaled, functions))(1) == 3


def test_the_node_keeps_a_bounded_number_of_functions(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    for step in range(shipping.KEPT_ON_A_NODE + 5):
        decode(sent(script.make_closure(step), functions))
    assert len(shipping._received) == shipping.KEPT_ON_A_NODE


def test_a_kept_pickle_does_not_keep_its_function_alive(script: types.SimpleNamespace) -> None:
    functions = ShippedFunctions()
    for step in range(20):
        sent(script.make_closure(step), functions)  # a lambda per call, as in a loop
    gc.collect()
    assert len(functions._kept) == 0


def test_a_request_travels_whole_and_refers_to_skywards_own_names(script: types.SimpleNamespace) -> None:
    """A ``TaskRequest`` (a ``msgspec.Struct``) pickles as its fields in order and skyward's own
    classes and functions in it go by name (``wire._WIRE_GLOBALS``): every field comes
    back, the second request to the node still runs the function it holds."""
    from skyward.core.function import SkywardFunction
    from skyward.core.instance import MembershipView
    from skyward.engine.wire import TaskRequest

    functions = ShippedFunctions()
    view = MembershipView(epoch=2, total_nodes=2, peers=(), total_accelerators=0.0)
    for _ in range(2):
        request = TaskRequest(
            "t7", "scaled", SkywardFunction(script.scaled, 4.0), (2.5,), {"k": [1]}, 4.0, "call", view
        )
        payload = encode(request, functions.shipment(0))
        assert isinstance(payload, bytes)
        assert b"TaskRequest" in payload and b"MembershipView" in payload and b"SkywardFunction" in payload
        back = decode_request(payload)
        assert (back.task_id, back.name, back.args, back.kwargs, back.timeout, back.kind, back.view) == (
            "t7", "scaled", (2.5,), {"k": [1]}, 4.0, "call", view
        )
        assert back.fn.timeout == 4.0 and back.fn.local(2.5) == 6


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_a_call_with_plain_arguments_of_a_held_function_refers_to_it_without_its_wrapper(
    script: types.SimpleNamespace, remote: bool,
) -> None:
    """The second call to a node, with plain arguments only (``wire._plain_pickle``), is
    pickled by the C pickler alone, as a tuple the node makes a request of
    (``wire.decode_request``): it refers to the very function the node holds, not to
    an ``@sky.function`` wrapper rebuilt on each call. A rebound global or an argument
    cloudpickle must handle takes the full path, and each runs what the client has now.
    The same with a remote pool's encoder."""
    from skyward.core.function import SkywardFunction
    from skyward.engine.wire import ByValueEncoder, TaskRequest

    encoder = ByValueEncoder() if remote else encode
    functions = ShippedFunctions()
    decorated = SkywardFunction(script.scaled, None)

    def request(*args: object) -> TaskRequest:
        return TaskRequest("t1", "scaled", decorated, args, {}, None, "call", None)

    first = decode_request(encoder(request(2.5), functions.shipment(0)))
    assert type(first.fn) is SkywardFunction, "the first call ships the function in full"
    plain = encoder(request(2.5), functions.shipment(0))
    assert isinstance(plain, bytes) and b"TaskRequest" not in plain, "a plain call names no class"
    second = decode_request(plain)
    assert second.fn is first.fn.local, "the node's own function, no wrapper"
    assert (second.task_id, second.args, second.kwargs, second.timeout, second.view) == ("t1", (2.5,), {}, None, None)
    assert second.fn(*second.args) == 6
    listed = decode_request(encoder(request([2.5]), functions.shipment(0)))
    assert type(listed.fn) is SkywardFunction, "a list argument goes the full way"

    class Name(str):
        """A script's str subclass: the C pickler would send it by a reference the node cannot resolve."""

    named = TaskRequest("t1", "scaled", decorated, (), {Name("x"): 2.5}, None, "call", None)
    assert type(decode_request(encoder(named, functions.shipment(0))).fn) is SkywardFunction, "so it goes the full way"
    script.scaled.__globals__["SCALE"] = 4
    rebound = decode_request(encoder(request(2.5), functions.shipment(0)))
    assert type(rebound.fn) is SkywardFunction and rebound.fn.local(2.5) == 8


def test_an_outcome_of_plain_values_pickles_as_cloudpickle_would() -> None:
    import pickle

    import cloudpickle

    for outcome in [(True, None, 0), (True, 3.5, 2), (False, "text", 0), (True, b"x" * 100, 0)]:
        assert encode(outcome) == pickle.dumps(outcome, protocol=5) == cloudpickle.dumps(outcome, protocol=5)
        assert decode(encode(outcome)) == outcome
    assert decode(encode((True, [1, {2}], 0))) == (True, [1, {2}], 0)


def test_a_call_of_an_importable_function_travels_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``@sky.function`` the node can import, and a plain importable function, go by
    name on every call: the node gets the very objects its import makes."""
    import importlib

    from skyward.engine.wire import TaskRequest

    (tmp_path / "importable_tasks.py").write_text(
        "import skyward as sky\n\n@sky.function\ndef double(x):\n    return 2 * x\n\ndef triple(x):\n    return 3 * x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("importable_tasks")
    functions = ShippedFunctions()
    for fn in (module.double, module.triple):
        for _ in range(2):
            request = TaskRequest("t1", "f", fn, (2,), {}, None, "call", None)
            back = decode_request(encode(request, functions.shipment(0)))
            assert back.fn is fn
    assert not shipping._received, "nothing was shipped by value"
