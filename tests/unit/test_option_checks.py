"""No option without an effect (``api/option_checks.py``): what is refused when a pool is
made, and what every built-in provider now accepts (nothing is opened here)."""

from __future__ import annotations

from typing import ClassVar

import pytest
from fake_cluster import FakeProvider

import skyward as sky
from skyward.providers.ssh.provider import check_remote_nodes

ELASTIC = sky.Options(
    autoscale_cooldown=5, autoscale_idle_timeout=5, reconcile_tick_interval=1, retry_on_interruption=0,
    health_checker=sky.HealthChecker(check=lambda: True),
)


class FixedProvider(FakeProvider):
    """A provider whose clusters cannot add or remove nodes (as a third party's may be)."""

    resizable: ClassVar[bool] = False  # type: ignore[misc]


@pytest.mark.parametrize("nodes", [4, (2, 8), sky.Nodes(8, min=4), sky.Nodes(4, min=2, max=16), sky.Nodes(1, min=0, max=2)])
def test_every_node_form_and_elastic_option_is_accepted_where_nodes_can_change(nodes: object) -> None:
    for provider in (sky.Local(), sky.Ray(address="head:6379"), sky.SSH(hosts=["h1"]), FakeProvider()):
        pool = sky.Compute(provider=provider, nodes=nodes, options=ELASTIC)  # made, not opened
        assert [spec.provider for spec in pool.specs] == [provider] and pool.options == ELASTIC


@pytest.mark.parametrize(
    "field, value",
    [
        ("autoscale_cooldown", 5.0), ("autoscale_idle_timeout", 5.0), ("reconcile_tick_interval", 1.0),
        ("health_checker", sky.HealthChecker(check=lambda: True)),
    ],
)
def test_membership_options_are_refused_where_nodes_cannot_change(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"Options.{field}=.* has no effect .*\(fake\).*cannot add or replace nodes"):
        sky.Compute(provider=FixedProvider(), options=sky.Options(**{field: value}))
    sky.Compute(provider=FixedProvider(), options=sky.Options(retry_on_interruption=0))  # the driver's: any provider


@pytest.mark.parametrize("nodes", [(2, 8), sky.Nodes(8, min=4), sky.Nodes(1, min=0)])
def test_elastic_node_forms_are_refused_where_nodes_cannot_change(nodes: object) -> None:
    with pytest.raises(ValueError, match=r"Spec.nodes=Nodes\(.*\) is not valid for sky.FixedProvider\(\).*fixed count"):
        sky.Compute(provider=FixedProvider(), nodes=nodes)
    pool = sky.Compute(provider=FixedProvider(), nodes=3)
    with pytest.raises(sky.PoolClosedError, match="resize it inside"):
        pool.resize(4)
    with pool:
        with pytest.raises(NotImplementedError, match=r"pool.resize\(\): sky.FixedProvider\(\) pools cannot add"):
            pool.resize(4)


def test_ssh_options_still_need_an_ssh_provider() -> None:
    with pytest.raises(ValueError, match=r"Options.ssh_timeout=5 has no effect .*\(local\)"):
        sky.Compute(options=sky.Options(ssh_timeout=5))


def test_remote_pools_that_scale_to_zero_run_without_collections() -> None:
    """Their collections would go with the head: the pool says so, naming the fix."""
    spec = sky.Spec(provider=sky.SSH(hosts=["h1", "h2"]), nodes=sky.Nodes(1, min=0, max=2))
    with pytest.raises(ValueError, match=r"Options.cluster=None is not valid: .*Nodes\(min=0\).*cluster=False"):
        check_remote_nodes(spec, sky.Options())
    lazy = sky.Spec(provider=sky.SSH(hosts=["h1"]), nodes=sky.Nodes(0))
    with pytest.raises(ValueError, match=r"Options.cluster=True is not valid: .*Nodes\(desired=0\)"):
        check_remote_nodes(lazy, sky.Options(cluster=True))
    check_remote_nodes(spec, sky.Options(cluster=False))
    check_remote_nodes(sky.Spec(provider=sky.SSH(hosts=["h1", "h2"]), nodes=sky.Nodes(2, min=1)), sky.Options())


def test_nodes_allow_zero_as_a_floor_and_as_a_lazy_start() -> None:
    assert (sky.Nodes(0).floor, sky.Nodes(0).ceiling) == (0, 1)
    with pytest.raises(ValueError, match="Nodes.desired=-1"):
        sky.Nodes(-1)
    with pytest.raises(ValueError, match="Nodes.min=-1"):
        sky.Nodes(1, min=-1)
    assert sky.Nodes(1, min=0).floor == 0
