"""AWS offers and prices against the local AWS (moto + recorded Price List and spot
history): instance types chosen from EC2's own descriptions, priced on demand and on
spot, filtered by the Spec, cheapest first; and the errors when nothing fits."""

from __future__ import annotations

import pytest
from cloud.aws_emulator import AWSEmulator

import skyward as sky

QUIET = sky.Options(console=False, logging=False)


def test_a100_spot_offers_are_sorted_by_price(aws: AWSEmulator) -> None:
    offers = sky.offers(accelerator=sky.accelerators.A100(memory="40GB"), allocation="spot")
    assert offers, "p4d.24xlarge has 8 A100 40GB"
    assert all(o.spot and o.accelerator == "A100" and o.accelerator_count >= 1 for o in offers)
    assert [o.hourly_price for o in offers] == sorted(o.hourly_price for o in offers)
    p4d = next(o for o in offers if o.instance_type == "p4d.24xlarge")
    assert p4d.hourly_price == pytest.approx(11.57 * 0.96)  # the cheapest zone's latest spot price
    assert p4d.ondemand_price == pytest.approx(32.7726)


def test_markets_follow_the_allocation(aws: AWSEmulator) -> None:
    t4 = sky.accelerators.T4()
    both = sky.offers(accelerator=t4)
    assert {o.spot for o in both} == {True, False}
    assert all(not o.spot for o in sky.offers(accelerator=t4, allocation="on-demand"))
    assert all(o.spot for o in sky.offers(accelerator=t4, allocation="always-spot"))
    cheapest = both[0]
    assert (cheapest.instance_type, cheapest.spot) == ("g4dn.xlarge", True)
    assert all(o.hourly_price <= 0.5 for o in sky.offers(accelerator=t4, max_hourly_cost=0.5))


def test_cpu_specs_get_no_gpu_machines(aws: AWSEmulator) -> None:
    offers = sky.offers(vcpus=2, memory_gb=1, allocation="on-demand")
    assert offers and all(o.accelerator is None and o.vcpus >= 2 for o in offers)
    assert offers[0].instance_type == "t3.micro"
    assert sky.offers(allocation="on-demand")[0].instance_type == "t3.medium", "at least 2 vCPUs and 4 GB by default"


def test_a_price_cap_below_every_offer_names_the_cheapest(aws: AWSEmulator) -> None:
    pool = sky.Compute(provider=sky.AWS(), accelerator=sky.accelerators.T4(), max_hourly_cost=0.01, options=QUIET)
    with pytest.raises(sky.NoAvailableProviderError, match=r"cheapest is g4dn\.xlarge \(spot\) at \$0\.2198/h"):
        pool.__enter__()
    assert not aws.run_requests, "nothing was started"


def test_an_accelerator_aws_does_not_sell_is_no_offer(aws: AWSEmulator) -> None:
    with pytest.raises(sky.NoAvailableProviderError, match="no instance type in us-east-1 that satisfies 'MI300X'"):
        sky.Compute(provider=sky.AWS(), accelerator=sky.accelerators.MI300X(), options=QUIET).__enter__()


def test_a_pinned_instance_type_is_used_as_it_is(aws: AWSEmulator) -> None:
    pinned = sky.Spec(provider=sky.AWS(), instance_type="m5.large", allocation="on-demand")
    offers = sky.AWS().offers(pinned)
    assert offers and {o.instance_type for o in offers} == {"m5.large"}
    assert sky.ComputePool(provider=sky.AWS(), machine="m5.large").specs[0].instance_type == "m5.large"
    with pytest.raises(ValueError, match="Spec.instance_type='m9.huge' is not valid: EC2 has no such instance type"):
        sky.AWS().offers(sky.Spec(provider=sky.AWS(), instance_type="m9.huge"))


def test_without_the_price_list_on_demand_prices_come_from_the_snapshot(aws: AWSEmulator) -> None:
    from click.testing import CliRunner

    from skyward.cli.main import main
    from skyward.providers.aws.catalog import cache_path
    from skyward.providers.aws.prices import snapshot
    from skyward.providers.base import PriceSnapshotWarning

    cache_path("us-east-1", "ondemand").unlink(missing_ok=True)
    date = snapshot()[0]
    dated = f"snapshot {date}"
    aws.pricing_down = True
    try:
        with pytest.warns(PriceSnapshotWarning, match=rf"us-east-1 are from skyward's snapshot of {date}, not live: .*500.*pricing:GetProducts"):
            offers = sky.offers(vcpus=2, memory_gb=1)
            command = ["offers", "--provider", "aws", "--vcpus", "2", "--allocation", "on-demand"]
            shown = CliRunner().invoke(main, command)
    finally:
        aws.pricing_down = False
    ondemand = [o for o in offers if not o.spot]
    assert ondemand and {o.price_source for o in ondemand} == {dated}
    assert next(o for o in ondemand if o.instance_type == "t3.micro").hourly_price == pytest.approx(0.0104)
    assert {o.price_source for o in offers if o.spot} == {"live"}, "spot prices do not need the Price List"
    assert shown.exit_code == 0 and f"* not live: from skyward's price {dated}" in shown.output, shown.output
    assert "0.0416*" in shown.output, "t3.medium's price is marked"
    assert {o.price_source for o in sky.offers(vcpus=2, allocation="on-demand")} == {"live"}, "live again once it answers"


def test_bad_provider_fields_name_the_field() -> None:
    with pytest.raises(ValueError, match="AWS.ami='ubuntu' is not valid"):
        sky.AWS(ami="ubuntu")
    with pytest.raises(ValueError, match="AWS.ssh_cidr='everyone' is not valid"):
        sky.AWS(ssh_cidr="everyone")
    with pytest.raises(ValueError, match="AWS.subnet_id="):
        sky.AWS(subnet_id="vpc-1")
    with pytest.raises(NotImplementedError, match="use_ssm"):
        sky.AWS(use_ssm=True).validate(sky.Spec(provider=sky.AWS(use_ssm=True)), sky.Options())
