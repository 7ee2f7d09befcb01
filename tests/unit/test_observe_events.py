"""Event delivery (pool handlers, global callbacks), cost accounting and map chunk plans."""

from __future__ import annotations

import time

import pytest

import skyward as sky
from skyward.observe.bus import EventBus
from skyward.observe.cost import CostMeter, Pricing


def test_handlers_get_their_type_and_subclasses_and_can_unsubscribe() -> None:
    bus = EventBus()
    logs: list[object] = []
    everything: list[object] = []
    stop = bus.on(sky.Log, logs.append)
    bus.on(sky.Event, everything.append)
    bus.emit(sky.Log(0, "hello"))
    bus.emit(sky.Metric(0, "cpu", 5.0, "%"))
    stop()
    bus.emit(sky.Log(1, "after"))
    assert [e.line for e in logs] == ["hello"]
    assert len(everything) == 3


def test_a_handler_added_or_removed_while_events_flow_gets_exactly_those_between() -> None:
    bus = EventBus()
    bus.emit(sky.Metric(0, "cpu", 1.0, "%"))  # the bus has worked out who takes a Metric
    metrics: list[object] = []
    stop = bus.on(sky.Metric, metrics.append)
    bus.emit(sky.Metric(0, "cpu", 2.0, "%"))
    stop()
    bus.emit(sky.Metric(0, "cpu", 3.0, "%"))
    assert [event.value for event in metrics] == [2.0]  # type: ignore[attr-defined]


def test_wants_tells_whether_anyone_listens() -> None:
    bus = EventBus()
    assert not bus.wants(sky.TaskStarted)
    stop = bus.on(sky.Event, print)
    assert bus.wants(sky.TaskStarted)
    stop()
    assert not bus.wants(sky.TaskStarted)
    with sky.use_callback(print):
        assert bus.wants(sky.TaskStarted)


def test_a_raising_handler_is_reported_once_as_an_error_event_and_kept() -> None:
    bus = EventBus()
    calls: list[int] = []
    errors: list[sky.Error] = []

    def broken(event: object) -> None:
        calls.append(1)
        raise RuntimeError("boom")

    bus.on(sky.Log, broken)
    bus.on(sky.Error, errors.append)
    for _ in range(3):
        bus.emit(sky.Log(0, "x"))
    assert len(calls) == 3
    assert len(errors) == 1
    assert "broken raised RuntimeError: boom" in errors[0].message


def test_a_raising_handler_goes_to_stderr_when_nobody_listens_for_errors(capsys) -> None:
    bus = EventBus()
    bus.on(sky.Log, lambda event: 1 / 0)
    bus.emit(sky.Log(0, "x"))
    bus.emit(sky.Log(0, "y"))
    err = capsys.readouterr().err
    assert err.count("ZeroDivisionError") == 1
    assert err[:2].isdigit() and err[2] == ":"


def test_pool_on_rejects_what_is_not_an_event_class() -> None:
    bus = EventBus()
    with pytest.raises(TypeError, match="event class such as sky.TaskCompleted"):
        bus.on("Log", print)
    with pytest.raises(TypeError, match="callable handler"):
        bus.on(sky.Log, None)


def test_use_callback_compose_and_emit() -> None:
    first: list[object] = []
    second: list[object] = []
    event = sky.Metric(0, "custom", 1.0)
    sky.emit(event)  # nobody registered: nothing happens
    with sky.use_callback(sky.compose(first.append, second.append)):
        sky.emit(event)
    sky.emit(event)
    assert first == [event] and second == [event]


def test_compose_calls_every_callback_then_raises_the_first_error() -> None:
    seen: list[str] = []

    def bad(event: object) -> None:
        seen.append("bad")
        raise ValueError("first")

    combined = sky.compose(bad, lambda e: seen.append("good"))
    with pytest.raises(ValueError, match="first"):
        combined(sky.Log(0, "x"))
    assert seen == ["bad", "good"]


def test_emit_reports_a_raising_callback_once(capsys) -> None:
    def noisy(event: object) -> None:
        raise KeyError("nope")

    with sky.use_callback(noisy):
        sky.emit(sky.Log(0, "a"))
        sky.emit(sky.Log(0, "b"))
    assert capsys.readouterr().err.count("KeyError") == 1


def test_bad_arguments_to_the_callback_api() -> None:
    with pytest.raises(TypeError, match="sky.compose"):
        sky.compose(print, 3)
    with pytest.raises(TypeError, match="sky.emit"):
        sky.emit("hello")
    with pytest.raises(TypeError, match="sky.use_callback"):
        with sky.use_callback(None):
            pass


def test_events_are_frozen() -> None:
    event = sky.TaskCompleted("t1", "f", 0, 0.5)
    with pytest.raises(AttributeError):
        event.node = 2  # type: ignore[misc]
    assert event.error is None and event.items is None and event.timestamp > 0


def test_pricing_cost_and_savings() -> None:
    pricing = Pricing(hourly_rate=1.2, ondemand_rate=3.6, spot_count=2)
    assert pricing.cost(3600) == pytest.approx(1.2)
    assert pricing.savings(1800) == pytest.approx(1.2)
    assert Pricing().cost(3600) == 0.0
    with pytest.raises(ValueError, match="Pricing.hourly_rate=-1"):
        Pricing(hourly_rate=-1)


def test_cost_meter_updates_while_running_and_emits_one_final() -> None:
    events: list[object] = []
    meter = CostMeter(Pricing(hourly_rate=36.0, ondemand_rate=72.0, spot_count=1), events.append, interval=0.05)
    meter.start()
    time.sleep(0.3)
    meter.stop()
    meter.stop()
    updates = [e for e in events if isinstance(e, sky.CostUpdate)]
    finals = [e for e in events if isinstance(e, sky.CostFinal)]
    assert len(updates) >= 3 and len(finals) == 1
    assert updates[-1].accumulated_cost == pytest.approx(36.0 * updates[-1].elapsed_seconds / 3600)
    final = finals[0]
    assert final.total_cost == pytest.approx(0.01 * final.total_seconds)
    assert final.savings_vs_ondemand == pytest.approx(final.total_cost)
    assert final.spot_count == 1


def test_a_free_cluster_has_no_updates_and_a_zero_final() -> None:
    events: list[object] = []
    meter = CostMeter(Pricing(ondemand_count=4), events.append, interval=0.01).start()
    time.sleep(0.05)
    meter.stop()
    assert len(events) == 1 and isinstance(events[0], sky.CostFinal)
    assert events[0].total_cost == 0.0 and events[0].ondemand_count == 4


def test_a_kept_pool_is_told_as_kept_adopted_and_let_go_not_started_and_stopped() -> None:
    from skyward.observe.describe import describe

    assert describe(sky.ClusterRequested("p", "local", 2)) == "pool p: starting 2 nodes on local"
    assert describe(sky.ClusterRequested("p", "local", 2, kept=True)) == (
        "pool p: asking the pool daemon for a kept pool of 2 nodes on local"
    )
    assert describe(sky.ClusterProvisioned("p", 2, 4.2)) == "pool p: 2 nodes provisioned in 4.2s"
    assert describe(sky.ClusterProvisioned("p", 2, 4.2, kept="kept")) == (
        "pool p: 2 nodes provisioned in 4.2s, kept by the pool daemon"
    )
    assert describe(sky.ClusterProvisioned("p", 2, 0.01, kept="adopted")) == "pool p: adopted the kept pool's 2 nodes in 0.0s"
    assert describe(sky.ClusterDestroyed("p", 3.0)) == "pool p: stopped after 3.0s"
    assert describe(sky.ClusterDestroyed("p", 3.0, kept=True)) == "pool p: let go after 3.0s; the pool daemon keeps it"
