"""One provider conformance suite, run on every cloud against its local fake (the local
AWS for AWS): ``validate`` refuses what it cannot honour naming the field; offers are
priced and sorted; a 2-node pool runs tasks on the cloud's machines (real test hosts)
and its teardown leaves nothing the cloud's API still shows; ``sky.gc`` finds and
removes a planted orphan; a cloud without capacity fails the pool with an error that
says so, leaving nothing behind. The pool and the launch check are ``rotated``: in CI
they run on AWS and two other clouds per commit, in turn by the commit's day
(tests/e2e/cloud/rotation.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from e2e.cloud.clouds import CLOUDS, Cloud, started

import skyward as sky
from skyward.cli import launch_check

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def where() -> tuple[int, str]:
    info = sky.instance_info()
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.peers[info.node].private_ip


@pytest.fixture(scope="module", params=CLOUDS)
def cloud(request: pytest.FixtureRequest, lab: Any) -> Iterator[Cloud]:
    with started(request.param, lab) as running:
        yield running


def test_validate_refuses_what_it_cannot_honour_naming_the_field(cloud: Cloud) -> None:
    provider = cloud.make()
    for fields, name in cloud.refusals:
        spec = sky.Spec(provider=provider, **fields)
        with pytest.raises((ValueError, NotImplementedError)) as refused:
            provider.validate(spec, OPTIONS)
        assert name in str(refused.value), f"{cloud.name}: {fields} refused without naming {name}: {refused.value}"


def test_offers_are_priced_and_sorted(cloud: Cloud) -> None:
    provider = cloud.make()
    spec = sky.Spec(provider=provider, allocation="on-demand", **cloud.pool)
    offers = provider.offers(spec)
    assert offers, f"{cloud.name} has an offer for {cloud.pool}"
    assert all(o.provider == cloud.name and o.hourly_price > 0 and not o.spot for o in offers)
    assert [o.hourly_price for o in offers] == sorted(o.hourly_price for o in offers)
    if getattr(provider, "region", None) is not None:  # Spec.region (or the provider's) is where it looks
        assert {o.region for o in offers} == {provider.region}
    listed = sky.offers(provider, **cloud.pool)
    assert [o.hourly_price for o in listed] == sorted(o.hourly_price for o in listed)


@pytest.mark.rotated
def test_a_two_node_pool_runs_and_its_teardown_leaves_nothing(cloud: Cloud) -> None:
    fields: dict[str, Any] = {}
    if cloud.image_field is not None:
        fields[cloud.image_field] = sky.containers.cuda("12.8", variant="runtime", ubuntu="24.04")
    provisioned: list[sky.InstanceProvisioned] = []
    costs: list[sky.CostFinal] = []
    pool = sky.Compute(provider=cloud.make(**fields), nodes=2, options=OPTIONS, **cloud.pool)
    pool.on(sky.InstanceProvisioned, provisioned.append)
    pool.on(sky.CostFinal, costs.append)
    with pool:
        assert square(7) >> pool == 49
        nodes = where() @ pool
        assert sorted(node for node, _ in nodes) == [0, 1]
        assert pool.map(square, range(20)) == [x * x for x in range(20)]
        assert cloud.harness is not None
        assert {address for _, address in nodes} <= {host.address for host in cloud.harness.hosts.values()}
        assert len(cloud.leftovers(pool.id)) >= 2
    assert cloud.leftovers(pool.id) == [], "the cloud still holds some of the pool"
    assert len(provisioned) == 2 and all(e.provider == cloud.name and (e.price_on_demand or 0) > 0 for e in provisioned)
    assert costs and costs[0].hourly_rate > 0
    if cloud.images is not None:
        assert "nvidia/cuda:12.8.0-runtime-ubuntu24.04" in cloud.images(), "the container image reached the cloud"


def test_gc_finds_and_removes_a_planted_orphan(cloud: Cloud) -> None:
    planted = cloud.plant()
    provider = cloud.make()
    found = sky.gc([provider])
    assert planted in {o.id for o in found}
    sky.gc([provider], delete=True)
    assert planted not in {o.id for o in sky.gc([provider])}


def test_no_capacity_fails_clearly_and_leaves_nothing(cloud: Cloud) -> None:
    cloud.refuse_all()
    try:
        pool = sky.Compute(provider=cloud.make(), nodes=2, options=OPTIONS, **cloud.pool)
        with pytest.raises(Exception, match="(?i)capacity") as failed:
            pool.__enter__()
        assert "Try another" in str(failed.value) or "try another" in str(failed.value)
    finally:
        cloud.allow_all()
    assert cloud.leftovers(pool.id) == []


@pytest.mark.rotated
def test_the_launch_check_opens_one_machine_runs_a_task_and_leaves_nothing(cloud: Cloud) -> None:
    """``sky providers check CLOUD --launch`` (its core; the command is tested in
    test_launch_check_cli.py): asks with the offer before creating anything, times each
    phase, prices the run and tears the machine down."""
    asked: list[sky.Offer] = []

    def confirm(offer: sky.Offer) -> bool:
        asked.append(offer)
        return True

    report = launch_check.run(cloud.make(), cloud.pool.get("accelerator"), confirm, lambda line: None)
    assert report.ok, f"{cloud.name}: {report.error} {report.failed_calls}"
    assert asked == [report.offer] and report.offer is not None and report.offer.provider == cloud.name
    phases = [phase.name for phase in report.phases]
    assert phases[0] == "offers" and phases[-1] == "teardown (confirmed)", phases
    assert {"provision", "open (total)", "task"} <= set(phases), phases
    assert report.node["node"] == 0 and report.node["total_nodes"] == 1
    assert report.cost is not None and report.cost >= 0
    assert cloud.leftovers(report.pool) == [], f"{cloud.name}: the check left {cloud.leftovers(report.pool)}"
