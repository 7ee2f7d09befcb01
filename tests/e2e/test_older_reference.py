"""The older reference keeps working: its events reach a callback written for them
(``ComputePool(on_event=...)``, ``pool.on(OldEvent)``, ``sky.use_callback``), ``Error``
has ``instance_id``, ``sky.Callback``/``sky.SkywardEvent``, ``Image.pip_extra_index_url``,
``content_hash()`` and ``bootstrap(ttl)``, ``ComputePool(machine=...)`` and
``sky.Session(console=...)``."""

from __future__ import annotations

import time
from typing import Any

import pytest

import skyward as sky
from skyward.observe.bus import EventBus


@sky.function
def chatty() -> int:
    print("old hello", flush=True)
    return 1


def test_a_callback_written_for_the_older_events_receives_them() -> None:
    seen: list[Any] = []

    def callback(event: sky.SkywardEvent) -> None:
        seen.append(event)

    typed: sky.Callback = callback
    with sky.ComputePool(provider=sky.Local(), nodes=1, on_event=typed, display="quiet") as pool:
        assert chatty() >> pool == 1
        deadline = time.monotonic() + 5
        while not any(isinstance(e, sky.LogLine) for e in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
    names = {type(e).__name__ for e in seen}
    expected = {"InfraCreating", "InstanceLaunching", "InfraCreated", "InstanceProvisioned", "BootstrapStarting",
                "BootstrapProgress", "BootstrapCompleted", "LogLine", "InstanceStopping", "PoolStopping", "CostFinal"}
    assert expected <= names, f"missing {expected - names}"
    line = next(e for e in seen if isinstance(e, sky.LogLine))
    provisioned = next(e for e in seen if isinstance(e, sky.InstanceProvisioned))
    assert line.line == "old hello" and line.node == 0 and line.instance_id == provisioned.instance_id


def test_older_events_go_only_to_those_who_take_them() -> None:
    bus = EventBus()
    current: list[Any] = []
    old: list[Any] = []
    bus.on(sky.Event, current.append)
    bus.on(sky.LogLine, old.append)
    bus.emit(sky.InstanceProvisioned(0, "i-1"))
    bus.emit(sky.Log(0, "hi"))
    bus.emit(sky.Metric(0, "memory", 50.0))
    bus.emit(sky.Metric(0, "cpu", 12.0))
    assert [type(e).__name__ for e in current] == ["InstanceProvisioned", "Log", "Metric", "Metric"]
    assert old == [sky.LogLine(0, "i-1", "hi", old[0].timestamp)]
    with sky.use_callback(current.append):
        bus.emit(sky.Metric(0, "cpu", 20.0))
    metrics = [e for e in current if isinstance(e, sky.Metrics)]
    assert metrics and metrics[0].cpu_percent == 20.0 and metrics[0].memory_percent == 50.0
    assert sky.Error("boom", instance_id="i-1").instance_id == "i-1"


def test_image_fields_and_methods_of_the_older_reference() -> None:
    image = sky.Image(pip=["torch"], pip_extra_index_url="https://download.pytorch.org/whl/cu121")
    assert image.pip_indexes == (sky.PipIndex("https://download.pytorch.org/whl/cu121"),)
    assert len(image.content_hash()) == 12 and image.content_hash() == sky.Image(
        pip=["torch"], pip_extra_index_url="https://download.pytorch.org/whl/cu121").content_hash()
    assert image.content_hash() != sky.Image(pip=["numpy"]).content_hash()
    script = image.bootstrap()
    assert script.startswith("#!/usr/bin/env bash") and "download.pytorch.org" in script and "shutdown -h" not in script
    assert "shutdown -h +2" in image.bootstrap(ttl=90)
    with pytest.raises(ValueError, match="Image.pip_extra_index_url='pypi' is not valid"):
        sky.Image(pip_extra_index_url="pypi")


def test_compute_pool_machine_pins_the_instance_type() -> None:
    pool = sky.ComputePool(provider=sky.AWS(), machine="p5.48xlarge")
    assert pool.specs[0].instance_type == "p5.48xlarge"
    for provider in (sky.Local(), sky.RunPod(), sky.DigitalOcean(), sky.SSH(hosts=["10.255.255.1"])):
        with pytest.raises(ValueError, match=r"Spec.instance_type='p5.48xlarge' is not valid"):
            provider.validate(sky.Spec(provider=provider, instance_type="p5.48xlarge"), sky.Options())


def test_session_takes_pool_options_as_keywords() -> None:
    assert sky.Session(console="log").options == sky.Options(console="log")
    assert sky.Session(sky.Options(console=False), shutdown_timeout=5).options == sky.Options(console=False, shutdown_timeout=5)
    with pytest.raises(TypeError, match="unknown option"):
        sky.Session(colour=True)
    with sky.Session(console=False, logging=False) as session:
        pool = session.compute(nodes=1)
        assert chatty() >> pool == 1
