"""Fallback across clouds in one ``Compute(...)``: RunPod and Hyperstack have no
capacity, so the pool runs on Vast.ai; RunPod and Hyperstack are left holding nothing
(Hyperstack: no VM, keypair or environment) and the errors say why they were passed over."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cloud.fake_hyperstack import FakeHyperstack
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
def clouds(lab: Any) -> Iterator[tuple[FakeRunPod, FakeHyperstack, FakeVastAI]]:
    runpod, hyperstack, vast = FakeRunPod(), FakeHyperstack(), FakeVastAI()
    runpod.use_subnet(lab.cidr, first=100)
    hyperstack.use_subnet(lab.cidr, first=200)
    vast.use_subnet(lab.cidr, first=150)
    for fake in (runpod, hyperstack, vast):
        fake.start()
    harness = Harness(lab, runpod, hyperstack, vast).start()
    try:
        with environment({**runpod.env(), **hyperstack.env(), **vast.env()}):
            yield runpod, hyperstack, vast
    finally:
        harness.stop()
        for fake in (runpod, hyperstack, vast):
            fake.stop()


def test_a_cloud_without_capacity_falls_back_to_another_cloud(
    clouds: tuple[FakeRunPod, FakeHyperstack, FakeVastAI],
) -> None:
    runpod, hyperstack, vast = clouds
    runpod.refuse()
    hyperstack.refuse()
    l4 = sky.accelerators.L4()
    errors: list[sky.Error] = []
    provisioned: list[sky.InstanceProvisioned] = []
    pool = sky.Compute(sky.Spec(provider=sky.RunPod(), accelerator=l4, nodes=2),
                       sky.Spec(provider=sky.Hyperstack(), accelerator=sky.accelerators.RTX_A6000(), nodes=2),
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
    assert any("Hyperstack had no capacity" in e.message and "Not enough resources" in e.message for e in errors)
    assert hyperstack.bodies("POST", "/core/virtual-machines"), "Hyperstack was asked before Vast.ai"
    assert runpod.live() == [] and vast.live(pool.id[:12]) == []
    assert hyperstack.live() == [] and hyperstack.keys == {} and hyperstack.environments == {}
