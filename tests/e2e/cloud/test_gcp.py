"""Google Compute Engine against the local fake of its API v1, Billing Catalog and token
endpoint, with real test hosts: offers priced live from the Billing Catalog (vCPUs x the
family's core SKU + GiB x its RAM SKU + GPUs, spot from the Preemptible SKUs, every page
read, kept a day), or from the shipped snapshot and marked so, with a warning, when the
catalog answers 403 SERVICE_DISABLED or lacks a family (a2/g2 GPUs from the machine
types, N1 machines with attached GPUs, types skyward does not offer left out);
credentials from a service-account key signed into a token (refreshed when it expires),
gcloud's application-default file, or refused naming where they were looked for; the
project from the argument, the environment or the key; a spot pool in firewall rules of
its own (SSH from anywhere, everything from the pool's own tag) with labels, key metadata
and scheduling as Compute Engine takes them, and nothing left after it; a reclaimed spot
instance replaced without losing an item; a zone out of the GPU falls back to the next
Spec; an operation that never finishes stops the wait
at the timeout and leaves no instance; a stockout is "no capacity"; orphan firewall rules
found and removed by ``sky.gc``; bad fields refused naming the field."""

from __future__ import annotations

import datetime
import json
import shutil
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_gcp import BILLING_PAGE, PROJECT, ZONE, FakeGCP, billing_skus
from e2e.cloud.clouds import Cloud, started

import skyward as sky
from skyward.providers.base import PriceSnapshotWarning
from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.cloud.errors import CapacityError, CloudError, CredentialsError
from skyward.providers.gcp.api import GCPAPI
from skyward.providers.gcp.auth import token_for
from skyward.providers.gcp.prices import _snapshot, cache_folder

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1, reconcile_tick_interval=1.0)
L4 = sky.accelerators.L4()
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"


@sky.function
def square(x: int) -> int:
    return x * x


def slow_cube(x: int) -> int:
    time.sleep(0.1)
    return x**3


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("gcp", lab) as running:
        yield running


def fake_of(cloud: Cloud) -> FakeGCP:
    assert isinstance(cloud.fake, FakeGCP)
    return cloud.fake


def offered(provider: sky.GCP, **fields: Any) -> list[tuple[str, float, bool, float, str | None]]:
    return [(o.instance_type, round(o.hourly_price, 4), o.spot, o.accelerator_count, o.accelerator)
            for o in provider.offers(sky.Spec(provider=provider, **fields))]


def forget_prices() -> None:
    """Drop the Billing Catalog read this module's SKYWARD_HOME keeps (a day)."""
    shutil.rmtree(cache_folder(), ignore_errors=True)


def test_offers_are_priced_live_from_the_billing_catalog_read_page_by_page(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    forget_prices()
    read = len(fake.billing_queries)
    provider = sky.GCP()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PriceSnapshotWarning)
        kinds = {k.name: k for k in provider.api().machine_types(ZONE)}
        queries = fake.billing_queries[read:]
        assert len(queries) == -(-len(billing_skus()) // BILLING_PAGE) > 1, "every page is read"
        assert [q.get("pageToken") for q in queries] == [None, *(str(BILLING_PAGE * i) for i in range(1, len(queries)))]
        assert {q["pageSize"] for q in queries} == {"5000"}
        # vCPUs x the family's core SKU + GiB x its RAM SKU (+ GPUs x the GPU's SKU); spot from the Preemptible SKUs
        assert {name: (k.price, k.spot_price, k.price_source) for name, k in kinds.items() if name in (
            "e2-standard-2", "n2-standard-4", "g2-standard-4", "g2-standard-24", "a2-ultragpu-1g",
            "n1-standard-4+1xnvidia-tesla-t4", "n1-standard-16+2xnvidia-tesla-v100")} == {
            "e2-standard-2": (0.074, 0.024, "live"),  # 2 x 0.025 + 8 x 0.003; 2 x 0.008 + 8 x 0.001
            "n2-standard-4": (0.22, 0.064, "live"),  # 4 x 0.035 + 16 x 0.005; 4 x 0.01 + 16 x 0.0015
            "g2-standard-4": (0.784, 0.3136, "live"),  # 4 x 0.03 + 16 x 0.004 + 0.6 (L4); 4 x 0.012 + 16 x 0.0016 + 0.24
            "g2-standard-24": (2.304, 0.9216, "live"),  # 24 cores, 96 GiB, 2 L4
            "a2-ultragpu-1g": (5.27, 1.687, "live"),  # 12 cores, 170 GiB, 1 A100 80GB
            "n1-standard-4+1xnvidia-tesla-t4": (0.635, 0.205, "live"),  # 4 x 0.04 + 15 x 0.005 + 0.4
            "n1-standard-16+2xnvidia-tesla-v100": (6.14, 2.22, "live"),  # 16 cores, 60 GiB, 2 V100
        }
        assert {k.price_source for k in kinds.values()} == {"live"}
        snapshot = _snapshot()[1]["us-central1"].machines
        assert all(k.price != snapshot[name][0] for name, k in kinds.items() if name in snapshot), "not the snapshot's"
        assert offered(provider, accelerator=L4, allocation="spot")[0] == ("g2-standard-4", 0.3136, True, 1, "L4")
        l4 = provider.offers(sky.Spec(provider=provider, accelerator=L4, allocation="on-demand"))
        assert {o.price_source for o in l4} == {"live"}
        provider.api().machine_types(ZONE)
        assert len(fake.billing_queries) == read + len(queries), "the catalog is read once a day"
    with pytest.raises(ValueError, match=r"GCP\.zone='asia-east1-a' is not valid: the Cloud Billing Catalog has no "
                                         r"Compute Engine prices in asia-east1, .*snapshot covers .*us-central1"):
        sky.GCP(zone="asia-east1-a").offers(sky.Spec(provider=provider, vcpus=2))


def test_a_family_the_catalog_lacks_is_priced_from_the_snapshot_with_a_warning(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    date = _snapshot()[0]
    forget_prices()
    fake.billing_without = {"G2"}
    try:
        with pytest.warns(PriceSnapshotWarning, match=rf"GCP prices in us-central1 of g2 \+ nvidia-l4 are from "
                                                      rf"skyward's snapshot of {date}, not live"):
            kinds = {k.name: k for k in sky.GCP().api().machine_types(ZONE)}
    finally:
        fake.billing_without = set()
        forget_prices()
    snapshot = _snapshot()[1]["us-central1"].machines
    assert (kinds["g2-standard-4"].price, kinds["g2-standard-4"].price_source) == (
        snapshot["g2-standard-4"][0], f"snapshot {date}")
    assert kinds["e2-standard-2"].price_source == "live"


def test_without_the_billing_api_offers_are_priced_from_the_dated_snapshot_with_a_warning(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    date = _snapshot()[0]
    forget_prices()
    fake.billing_disabled = True
    try:
        with pytest.warns(PriceSnapshotWarning, match=(
            rf"GCP prices in us-central1 are from skyward's snapshot of {date}, not live: .*HTTP 403: Cloud Billing API "
            r"has not been used in project .*Live prices return once the Cloud Billing Catalog API answers: enable the "
            r"Cloud Billing API in the project \(gcloud services enable cloudbilling\.googleapis\.com"
        )):
            offers_priced_from_the_snapshot(date)
        with pytest.raises(ValueError, match=r"GCP\.zone='asia-east1-a' is not valid: .*HTTP 403.*snapshot covers "
                                             r".*us-central1"):
            sky.GCP(zone="asia-east1-a").offers(sky.Spec(provider=sky.GCP(), vcpus=2))
    finally:
        fake.billing_disabled = False
    assert not cache_folder().exists() or not any(cache_folder().iterdir()), "a failed read is not kept"


def offers_priced_from_the_snapshot(date: str) -> None:
    provider = sky.GCP()
    l4 = provider.offers(sky.Spec(provider=provider, accelerator=L4, allocation="on-demand"))
    assert [(o.instance_type, o.accelerator, o.accelerator_count, o.accelerator_memory_gb) for o in l4] == [
        ("g2-standard-4", "L4", 1, 24.0), ("g2-standard-8", "L4", 1, 24.0), ("g2-standard-24", "L4", 2, 24.0),
    ]
    assert {o.price_source for o in l4} == {f"snapshot {date}"} and l4[0].region == ZONE
    assert offered(provider, accelerator=sky.accelerators.T4(), allocation="on-demand") == [
        ("n1-standard-4+1xnvidia-tesla-t4", 0.54, False, 1, "T4"),
        ("n1-standard-8+1xnvidia-tesla-t4", 0.73, False, 1, "T4"),
        ("n1-standard-16+2xnvidia-tesla-t4", 1.46, False, 2, "T4"),
        ("n1-standard-32+4xnvidia-tesla-t4", 2.92, False, 4, "T4"),
    ], "an N1 machine's price plus its GPUs'"
    assert offered(provider, accelerator=sky.accelerators.A100(memory="80GB"), allocation="spot") == [
        ("a2-ultragpu-1g", 1.5206, True, 1, "A100"),
    ], "nvidia-a100-80gb is an A100 80GB; nvidia-tesla-a100 (40GB) is not"
    cpu = [name for name, *_ in offered(provider, vcpus=2, memory_gb=4)]
    assert "m1-ultramem-40" not in cpu and "n1-standard-2" not in cpu, "unpriced and deprecated types are left out"
    assert cpu[0] == "e2-standard-2", "spot first when cheaper (spot-if-available)"


@pytest.mark.rotated("gcp")
def test_a_spot_pool_is_labelled_keyed_and_walled_in_and_leaves_nothing(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    pool = sky.Compute(provider=sky.GCP(), nodes=1, accelerator=L4, allocation="spot", options=OPTIONS)
    with pool:
        assert square(6) >> pool == 36
        group = naming.key_name(pool.id)
        ssh, peers = fake.firewalls[f"{group}-ssh"], fake.firewalls[f"{group}-peers"]
        assert (ssh["sourceRanges"], ssh["allowed"], ssh["targetTags"]) == (
            ["0.0.0.0/0"], [{"IPProtocol": "tcp", "ports": ["22"]}], [group])
        assert (peers.get("sourceRanges"), peers["sourceTags"], peers["allowed"], peers["targetTags"]) == (
            None, [group], [{"IPProtocol": "all"}], [group])
        body = fake.bodies("POST", f"/projects/{PROJECT}/zones/{ZONE}/instances")[-1]
        assert body["machineType"] == f"zones/{ZONE}/machineTypes/g2-standard-4" and body["tags"] == {"items": [group]}
        assert body["scheduling"] == {"onHostMaintenance": "TERMINATE", "automaticRestart": False,
                                      "provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}
        labels = body["labels"]
        assert labels["skyward-pool"] == pool.id[:12] and labels["skyward-owner"]
        expires = datetime.datetime.strptime(labels["skyward-expires"], "%Y%m%dt%H%M%Sz").replace(tzinfo=datetime.UTC)
        assert expires > datetime.datetime.now(datetime.UTC)
        metadata = {item["key"]: item["value"] for item in body["metadata"]["items"]}
        key = metadata["ssh-keys"].removeprefix("root:").removesuffix(" root")
        assert key.startswith("ssh-ed25519 ") and key in metadata["startup-script"]
        posted = [r.path for r in fake.requests if r.method == "POST"]
        assert max(i for i, p in enumerate(posted) if p.endswith("/firewalls")) < next(
            i for i, p in enumerate(posted) if p.endswith("/instances")), "the rules exist before any instance"
        assert all(pool.id[:12] in name for name in fake.firewalls if name.startswith(group))
    assert cloud.leftovers(pool.id) == []
    deletions = [r.path for r in fake.requests if r.method == "DELETE"]
    assert deletions[-2:] == [f"/projects/{PROJECT}/global/firewalls/{group}-ssh",
                              f"/projects/{PROJECT}/global/firewalls/{group}-peers"], "the rules after the instances"


@pytest.mark.rotated("gcp")
def test_a_reclaimed_spot_instance_is_replaced_and_no_item_is_lost(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    machines: dict[int, str] = {}
    events: list[Any] = []
    finished: list[sky.TaskCompleted] = []
    pool = sky.Compute(provider=sky.GCP(), nodes=2, vcpus=2, allocation="spot", options=OPTIONS)
    pool.on(sky.InstanceProvisioned, lambda e: machines.__setitem__(e.node, e.instance_id))
    pool.on(sky.InstancePreempted, events.append)
    pool.on(sky.InstanceReplaced, events.append)
    pool.on(sky.TaskCompleted, finished.append)
    with pool:
        reclaimed = machines[1]
        results: list[int] = []
        errors: list[BaseException] = []

        def run_map() -> None:
            try:
                results.extend(pool.map(slow_cube, range(60)))
            except BaseException as exc:
                errors.append(exc)

        mapping = threading.Thread(target=run_map)
        mapping.start()
        deadline = time.monotonic() + 60
        while len(finished) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        fake.reclaim(reclaimed)
        mapping.join(180)
        assert not errors and results == [x**3 for x in range(60)]
        deadline = time.monotonic() + 180
        while not any(isinstance(e, sky.InstanceReplaced) and e.node == 1 for e in events):
            assert time.monotonic() < deadline, f"no replacement: {events}"
            time.sleep(0.2)
        assert any(isinstance(e, sky.InstancePreempted) and e.node == 1 for e in events)
        assert machines[1] != reclaimed
        assert any(op["operationType"] == "compute.instances.preempted" for op in fake.long_running.values())
    assert cloud.leftovers(pool.id) == []


@pytest.mark.rotated("gcp")
def test_a_zone_without_the_gpu_falls_back_to_the_next_spec_leaving_nothing(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    for kind in ("g2-standard-4", "g2-standard-8", "g2-standard-24"):
        fake.refuse(kind)
    errors: list[sky.Error] = []
    pool = sky.Compute(sky.Spec(provider=sky.GCP(), accelerator=L4, nodes=1, allocation="on-demand"),
                       sky.Spec(provider=sky.GCP(), vcpus=2, nodes=1, allocation="on-demand"),
                       options=sky.Options(console=False, logging=False, ssh_retry_interval=1, selection="first"))
    pool.on(sky.Error, errors.append)
    try:
        with pool:
            assert pool.spec is not None and pool.spec.accelerator is None
            assert square(5) >> pool == 25
            assert [m.kind for m in fake.live(pool.id[:12])] == ["e2-standard-2"]
    finally:
        fake.refused.clear()
    assert any("GCP had no capacity" in e.message and "ZONE_RESOURCE_POOL_EXHAUSTED" in e.message for e in errors)
    assert cloud.leftovers(pool.id) == []


def _order(kind_name: str, name: str, group: str = "skyward-0123456789ab-abcdef") -> Order:
    provider = sky.GCP()
    kinds = provider.api().machine_types(ZONE)
    kind = next(k for k in kinds if k.name == kind_name)
    return Order(name, kind, False, PUBLIC_KEY, None, provider.boot_image, "#!/bin/bash\nshutdown -h +30\n", None, group)


def test_an_n1_order_attaches_its_gpus_and_a_stockout_is_no_capacity(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    api = sky.GCP().api()
    name = naming.machine_name("0123456789abcdef", 7)
    machine_id = api.create(_order("n1-standard-8+1xnvidia-tesla-t4", name))
    machine = api.get(machine_id)
    assert machine is not None and machine.name == name and machine_id.isdigit()
    try:
        body = fake.bodies("POST", f"/projects/{PROJECT}/zones/{ZONE}/instances")[-1]
        assert body["machineType"].endswith("/n1-standard-8")
        assert body["guestAccelerators"] == [
            {"acceleratorType": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}]
        assert body["scheduling"]["onHostMaintenance"] == "TERMINATE" and "provisioningModel" not in body["scheduling"]
    finally:
        api.delete(machine_id)
    fake.refuse("e2-standard-2")
    try:
        with pytest.raises(CapacityError, match=r"GCP has no e2-standard-2 in us-central1-a now: "
                                                r"ZONE_RESOURCE_POOL_EXHAUSTED"):
            api.create(_order("e2-standard-2", naming.machine_name("0123456789abcdef", 8)))
    finally:
        fake.refused.clear()


def test_an_operation_that_never_finishes_stops_the_wait_and_leaves_no_instance(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    token = token_for(None)
    api = GCPAPI(PROJECT, ZONE, "default", token.headers, operation_timeout=2.0)
    name = naming.machine_name("0123456789abcdef", 9)
    fake.hold_operations = True
    try:
        started_at = time.monotonic()
        with pytest.raises(CloudError, match=r"GCP operation operation-\S+ \(creating instance .*\) was not done "
                                             r"within 2s"):
            api.create(_order("e2-standard-2", name))
        assert time.monotonic() - started_at < 15
    finally:
        fake.hold_operations = False
    assert fake.named(name) is None, "the instance the operation was making is deleted"


def test_gc_removes_orphan_firewall_rules(cloud: Cloud) -> None:
    fake = fake_of(cloud)
    orphan = naming.key_name("fedcba9876543210")
    sky.GCP().api().add_firewall(orphan)
    assert {f"{orphan}-ssh", f"{orphan}-peers"} <= set(fake.firewalls)
    assert ("firewall", orphan) in {(o.kind, o.id) for o in sky.gc([sky.GCP()])}
    sky.gc([sky.GCP()], delete=True)
    assert not [name for name in fake.firewalls if name.startswith(orphan)]


def test_credentials_a_key_a_token_and_the_project(cloud: Cloud, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    fake = fake_of(cloud)
    spec = sky.Spec(provider=sky.GCP(), vcpus=2)
    grants = len(fake.grants)
    fake.token_lifetime = 1  # google-auth refreshes a token that expires within its threshold
    try:
        key = fake.credentials_file(tmp_path)
        provider = sky.GCP(credentials_file=str(key))
        assert provider.offers(spec) and provider.offers(spec)
        assert len(fake.grants) >= grants + 2, "an expiring token is refreshed"
    finally:
        fake.token_lifetime = 3600
    grants = len(fake.grants)
    provider = sky.GCP(credentials_file=str(fake.credentials_file(tmp_path)))
    provider.offers(spec)
    provider.offers(spec)
    assert len(fake.grants) == grants + 1, "a valid token is reused across providers and calls"

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with pytest.raises(CredentialsError, match=r"Google refused the credentials of .*gcp-key-\d+\.json \(invalid_grant"):
        sky.GCP(credentials_file=str(fake.credentials_file(tmp_path, private_key=stranger))).offers(spec)
    clear = fake.credentials_file(tmp_path, token_uri="http://oauth2.example.com/token")
    with pytest.raises(CloudError, match=r"token_uri in .* is not valid: .*https://"):
        sky.GCP(credentials_file=str(clear)).offers(spec)
    wrong_type = tmp_path / "other.json"
    wrong_type.write_text(json.dumps({"type": "external_account"}))
    with pytest.raises(CredentialsError, match=r"other\.json has type 'external_account'"):
        sky.GCP(credentials_file=str(wrong_type)).offers(spec)

    # the project: the argument, else $GOOGLE_CLOUD_PROJECT, else the key's project_id
    no_project = str(fake.credentials_file(tmp_path, project_id=None))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    with pytest.raises(CredentialsError, match=r"no GCP project was given: pass GCP\(project=\.\.\.\), set "
                                               r"\$GOOGLE_CLOUD_PROJECT"):
        sky.GCP(credentials_file=no_project).offers(spec)
    assert sky.GCP(credentials_file=no_project, project=PROJECT).offers(spec)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    assert sky.GCP(credentials_file=no_project).offers(spec)
    with pytest.raises(CredentialsError, match=r"Permission denied on resource project other-project-1"):
        sky.GCP(project="other-project-1").offers(spec)

    # gcloud's application-default credentials, when $GOOGLE_APPLICATION_CREDENTIALS is unset
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    with pytest.raises(CredentialsError, match=r"GCP credentials were not found: set \$GOOGLE_APPLICATION_CREDENTIALS "
                                               r".*application_default_credentials\.json"):
        sky.GCP().offers(spec)
    (tmp_path / "gcloud").mkdir()
    expiry = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.tokens["ya29.user-token"] = time.time() + 3600
    (tmp_path / "gcloud" / "application_default_credentials.json").write_text(json.dumps({
        "type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r",
        "quota_project_id": PROJECT, "token": "ya29.user-token", "expiry": expiry,
    }))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    assert sky.GCP().offers(spec), "the ADC file's token and quota project"
    assert fake.requests[-1].path.endswith("/acceleratorTypes")


@pytest.mark.parametrize(("fields", "named"), [
    ({"zone": "us-central1"}, r"GCP\.zone='us-central1' is not valid: give a Compute Engine zone"),
    ({"project": "My Project"}, r"GCP\.project='My Project' is not valid"),
    ({"network": "Default Net"}, r"GCP\.network='Default Net' is not valid"),
    ({"boot_image": ""}, r"GCP\.boot_image='' is not valid"),
    ({"boot_image": sky.containers.cuda("12.8")}, r"GCP\.boot_image=.*virtual machines"),
    ({"operation_timeout": 0}, r"GCP\.operation_timeout=0 is not valid"),
])
def test_bad_fields_are_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        sky.GCP(**fields)


def test_a_spec_for_another_zone_is_refused(cloud: Cloud) -> None:
    provider = sky.GCP()
    with pytest.raises(ValueError, match=r"Spec\.region='europe-west4-b' is not valid: sky\.GCP works in its zone"):
        provider.validate(sky.Spec(provider=provider, region="europe-west4-b"), OPTIONS)


def test_the_api_url_must_be_https_unless_loopback(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYWARD_GCP_API_URL", "http://compute.example.com/compute/v1")
    with pytest.raises(ValueError, match=r"SKYWARD_GCP_API_URL=.*https://"):
        sky.GCP().api()
    monkeypatch.setenv("SKYWARD_GCP_API_URL", "https://compute.googleapis.com/compute/v1")
    monkeypatch.setenv("SKYWARD_GCP_BILLING_API_URL", "http://cloudbilling.example.com/v1")
    with pytest.raises(ValueError, match=r"SKYWARD_GCP_BILLING_API_URL=.*https://"):
        sky.GCP().api()
