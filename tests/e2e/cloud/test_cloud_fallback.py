"""Fallback across clouds in one ``Compute(...)``: RunPod has no capacity, so the pool
runs on Vast.ai; RunPod is left holding nothing and the errors say why it was passed
over."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_runpod import FakeRunPod
from cloud.fake_vastai import FakeVastAI
from cloud.machines import Harness
from e2e.cloud.conftest import environment

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1, selection="first")


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def clouds(lab: Any) -> Iterator[tuple[FakeRunPod, FakeVastAI]]:
    runpod, vast = FakeRunPod(), FakeVastAI()
    runpod.use_subnet(lab.cidr, first=100)
    vast.use_subnet(lab.cidr, first=150)
    runpod.start()
    vast.start()
    harness = Harness(lab, runpod, vast).start()
    try:
        with environment({**runpod.env(), **vast.env()}):
            yield runpod, vast
    finally:
        harness.stop()
        runpod.stop()
        vast.stop()


def test_a_cloud_without_capacity_falls_back_to_another_cloud(clouds: tuple[FakeRunPod, FakeVastAI]) -> None:
    runpod, vast = clouds
    runpod.refuse()
    l4 = sky.accelerators.L4()
    errors: list[sky.Error] = []
    provisioned: list[sky.InstanceProvisioned] = []
    pool = sky.Compute(sky.Spec(provider=sky.RunPod(), accelerator=l4, nodes=2),
                       sky.Spec(provider=sky.VastAI(), accelerator=l4, nodes=2), options=OPTIONS)
    pool.on(sky.Error, errors.append)
    pool.on(sky.InstanceProvisioned, provisioned.append)
    with pool:
        assert pool.spec is not None and pool.spec.provider.name == "vastai"
        assert pool.map(square, range(10)) == [x * x for x in range(10)]
        assert len(vast.live(pool.id[:12])) == 2
    assert any("RunPod had no capacity" in e.message and "no longer any instances available" in e.message for e in errors)
    assert {e.provider for e in provisioned} == {"vastai"}
    assert runpod.bodies("POST", "/pods"), "RunPod was asked first"
    assert runpod.live() == [] and vast.live(pool.id[:12]) == []
