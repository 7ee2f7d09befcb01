"""Fallback across clouds in one ``Compute(...)``: one Spec on each of the fourteen clouds
of the conformance suite, all but the last without capacity. The pool runs on the last;
the others were asked in the Specs' order, each error says why a cloud was passed over
(in the cloud's own words), and none holds anything of the pool (machines, keys,
firewalls, Hyperstack's environment)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from e2e.cloud.clouds import CLOUDS, started

import skyward as sky

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1, selection="first")
OWN_WORDS = {"runpod": "no longer any instances available", "hyperstack": "Not enough resources"}
"""What two clouds' APIs say when they have no room, which their error must carry."""


@sky.function
def square(x: int) -> int:
    return x * x


def test_a_pool_falls_back_through_every_cloud_to_the_last(lab: Any) -> None:
    *refusing, landing = CLOUDS
    with contextlib.ExitStack() as stack:
        clouds = [stack.enter_context(started(name, lab)) for name in CLOUDS]
        for cloud in clouds[:-1]:
            cloud.refuse_all()
        errors: list[sky.Error] = []
        provisioned: list[sky.InstanceProvisioned] = []
        pool = sky.Compute(*(sky.Spec(provider=c.make(), nodes=1, **c.pool) for c in clouds), options=OPTIONS)
        pool.on(sky.Error, errors.append)
        pool.on(sky.InstanceProvisioned, provisioned.append)
        with pool:
            assert pool.spec is not None and pool.spec.provider.name == landing
            assert pool.map(square, range(10)) == [x * x for x in range(10)]
        assert {e.provider for e in provisioned} == {landing}
        for cloud in clouds:
            assert cloud.leftovers(pool.id) == [], f"{cloud.name} kept something of the pool"
        told = [next((i for i, e in enumerate(errors) if e.message.startswith(f"{name}: ") and "had no capacity" in e.message),
                     None) for name in refusing]
        assert None not in told, f"no error says why {refusing[told.index(None)]} was passed over: {errors}"
        assert told == sorted(told), "the clouds were asked in the Specs' order"
        for name, words in OWN_WORDS.items():
            assert any(words in e.message for e in errors), f"{name}'s own reason is not in its error"
