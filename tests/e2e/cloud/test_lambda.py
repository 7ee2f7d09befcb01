"""Lambda against the local fake of its Cloud API with real test hosts: offers from the
instance types in the regions with room for them, priced from ``price_cents_per_hour``,
GPU names read into the catalog; spot refused; a pool whose instances carry its SSH key
and a firewall ruleset of its own (SSH from anywhere, the rest from the private network
only), torn down instances first, then the ruleset, then the key; the API key from
``api_key=``, the environment or Lambda's key file; orphan rulesets found and removed;
bad fields refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_cloud import TOKEN
from cloud.fake_lambda import FakeLambda
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.cloud import naming
from skyward.providers.cloud.errors import CredentialsError
from skyward.providers.lambda_cloud.api import PRIVATE_NETWORK
from skyward.providers.lambda_cloud.provider import ROOT_LOGIN

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
A10 = sky.accelerators.A10()


@sky.function
def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("lambda", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeLambda:
    assert isinstance(cloud.fake, FakeLambda)
    return cloud.fake


def test_offers_are_the_types_with_room_priced_by_the_hour(cloud: Cloud) -> None:
    provider = sky.Lambda()
    offers = provider.offers(sky.Spec(provider=provider, accelerator=A10))
    assert [(o.instance_type, o.region, o.hourly_price, o.spot, o.accelerator) for o in offers] == [
        ("gpu_1x_a10", "us-east-1", 0.75, False, "A10"),
        ("gpu_1x_a10", "us-west-1", 0.75, False, "A10"),
    ]
    west = sky.Lambda(region="us-west-1")
    assert [o.region for o in west.offers(sky.Spec(provider=west, accelerator=A10))] == [
        "us-west-1"
    ]
    [a100] = provider.offers(
        sky.Spec(provider=provider, accelerator=sky.accelerators.A100(memory="40GB"))
    )
    assert (a100.instance_type, a100.accelerator_memory_gb) == ("gpu_1x_a100_sxm4", 40.0)
    assert (
        provider.offers(sky.Spec(provider=provider, accelerator=sky.accelerators.A100())) == []
    ), "the 80 GB type has no region with room"
    [rtx] = provider.offers(
        sky.Spec(provider=provider, accelerator=sky.accelerators.Quadro_RTX_6000())
    )
    assert (rtx.instance_type, rtx.region) == ("gpu_1x_rtx6000", "us-south-1")


def test_spot_is_refused_naming_the_field_and_the_original_name_is_the_same_class() -> None:
    provider = sky.LambdaCloud()
    assert sky.LambdaCloud is sky.Lambda
    with pytest.raises(
        ValueError, match=r"Spec\.allocation='spot' is not valid: Lambda sells no spot"
    ):
        provider.validate(sky.Spec(provider=provider, accelerator=A10, allocation="spot"), OPTIONS)


@pytest.mark.rotated("lambda")
def test_a_pool_has_its_own_ruleset_and_admits_only_ssh_from_outside(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(
        provider=sky.Lambda(region="us-west-1", image_family="lambda-stack-24-04"),
        nodes=1,
        accelerator=A10,
        options=OPTIONS,
    )
    with pool:
        assert square(6) >> pool == 36
        name = naming.key_name(pool.id)
        assert [k["name"] for k in fake.keys.values() if k["name"] == name] == [name]
        [ruleset] = [r for r in fake.firewalls.values() if r["name"] == name]
        assert ruleset["region"] == "us-west-1"
        rules = [(r["protocol"], r["port_range"], r["source_network"]) for r in ruleset["rules"]]
        assert rules == [
            ("tcp", [22, 22], "0.0.0.0/0"),
            ("tcp", [1, 65535], PRIVATE_NETWORK),
            ("udp", [1, 65535], PRIVATE_NETWORK),
        ], "inbound: SSH from anywhere, everything else from the private network only"
        [body] = [
            b
            for b in fake.bodies("POST", "/instance-operations/launch")
            if b["ssh_key_names"] == [name]
        ]
        assert (body["region_name"], body["instance_type_name"], body["image"]) == (
            "us-west-1",
            "gpu_1x_a10",
            {"family": "lambda-stack-24-04"},
        )
        assert body["firewall_rulesets"] == [{"id": ruleset["id"]}]
        assert body["user_data"].startswith("#!/bin/bash\n" + ROOT_LOGIN)
    assert cloud.leftovers(pool.id) == []
    calls = [
        (r.method, r.path.split("/")[1]) for r in fake.requests if r.method in ("POST", "DELETE")
    ]
    assert calls[-3:] == [
        ("POST", "instance-operations"),
        ("DELETE", "firewall-rulesets"),
        ("DELETE", "ssh-keys"),
    ], "instances, then the ruleset, then the key"


def test_the_api_key_comes_from_the_argument_the_environment_or_the_key_file(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(
        CredentialsError, match=r"refused.*Lambda\(api_key=\.\.\.\) or \$LAMBDA_API_KEY"
    ):
        offers_of(sky.Lambda(api_key="wrong"))
    monkeypatch.delenv("LAMBDA_API_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert offers_of(sky.Lambda(api_key=TOKEN))
    with pytest.raises(
        CredentialsError, match=r"set \$LAMBDA_API_KEY \(or ~/\.lambda_cloud/lambda_keys\)"
    ):
        offers_of(sky.Lambda())
    (tmp_path / ".lambda_cloud").mkdir()
    (tmp_path / ".lambda_cloud" / "lambda_keys").write_text(f"api_key = {TOKEN}\n")
    assert offers_of(sky.Lambda()), "the key file Lambda's tools write (api_key = KEY)"
    assert TOKEN not in repr(sky.Lambda(api_key=TOKEN))


def test_gc_removes_an_orphan_ruleset_and_key(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("0123456789abcdef")
    api = sky.Lambda().api()
    key_id = api.add_key(orphan, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlanted planted")
    planted = {"name": orphan, "region": "us-east-1", "rules": []}
    ruleset = fake.handle("POST", "/firewall-rulesets", {}, planted)["data"]
    found = {(o.kind, o.id) for o in sky.gc([sky.Lambda()])}
    assert {("ssh-key", key_id), ("firewall", ruleset["id"])} <= found
    sky.gc([sky.Lambda()], delete=True)
    assert key_id not in fake.keys and ruleset["id"] not in fake.firewalls


def offers_of(provider: sky.Lambda) -> list[Any]:
    return provider.offers(sky.Spec(provider=provider, accelerator=A10))


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"region": "mars-1"}, r"Lambda\.region='mars-1'.*us-east-1"),
        ({"image_family": ""}, r"Lambda\.image_family=''"),
        ({"image_family": sky.containers.cuda("12.8")}, r"Lambda\.image_family=.*virtual machines"),
        ({"api_key": 42}, r"Lambda\.api_key of type int.*LAMBDA_API_KEY"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        sky.Lambda(**fields)


def test_the_api_url_must_be_https_unless_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_LAMBDA_API_URL", "http://cloud.example.com/api/v1")
    monkeypatch.setenv("LAMBDA_API_KEY", TOKEN)
    with pytest.raises(ValueError, match=r"SKYWARD_LAMBDA_API_URL=.*https://"):
        sky.Lambda().api()
