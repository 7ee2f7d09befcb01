"""Verda's client and fake held to Verda's official SDKs' request and response models
(tests/cloud/descriptions/verda: Verda publishes no OpenAPI document, so the models of
verda-cloud/sdk-python and verdacloud-sdk-go are transcribed there as one): a pool's
exchanges (token, offers on demand and spot, key, instance, teardown, no capacity, wrong
credentials) make no violation; a wrong field name planted in a request the client sends,
or in an answer the fake gives, is named; the SDKs' example answers read as our client
reads them (dollars an hour, GB, memory per GPU); a delete Verda reports as failed is not
taken for done."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.described import load
from cloud.fake_cloud import misspell
from cloud.fake_verda import FakeVerda

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CredentialsError
from skyward.providers.verda import api as verda

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
POOL = "0123456789abcdef"
IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeVerda]:
    running = FakeVerda().serve_here(monkeypatch, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def order(api: verda.VerdaAPI, key: str | None, kind: str = "1L40S.20V", spot: bool = False, n: int = 0) -> Order:
    kinds = {(k.name, k.region): k for k in api.machine_types(None)}
    return Order(naming.machine_name(POOL, n), kinds[kind, "FIN-01"], spot, PUBLIC_KEY, key, IMAGE, "#!/bin/sh\n",
                 100, naming.key_name(POOL))


def renamed(api: verda.VerdaAPI, path: str, old: str, new: str) -> None:
    """Plant a wrong field name in the bodies ``api`` sends to ``path``: ``old`` sent as ``new``."""
    call = api._http.call

    def planted(method: str, at: str, what: str, **kwargs: Any) -> object:
        body = kwargs.get("json")
        if at == path and isinstance(body, dict) and old in body:
            kwargs["json"] = {new if k == old else k: v for k, v in body.items()}
        return call(method, at, what, **kwargs)

    api._http.call = planted  # type: ignore[method-assign]


def test_a_pools_exchanges_agree_with_verdas_sdk_models(fake: FakeVerda) -> None:
    api = verda.VerdaAPI()
    kinds = {(k.name, k.region): k for k in api.machine_types(None)}
    l40s = kinds["1L40S.20V", "FIN-01"]
    assert (l40s.price, l40s.spot_price, l40s.accelerator, l40s.accelerator_memory_gb) == (0.91, 0.30, "L40S 48GB", 48)
    assert {region for _, region in kinds} == {"FIN-01", "FIN-02"}
    key = api.add_key(naming.key_name(POOL), PUBLIC_KEY)
    registered = api.keys()
    assert [k.id for k in registered] == [key]
    made = api.create(order(api, key))
    machine = api.get(made)
    assert machine is not None and machine.state == "starting" and machine.ssh_host is None
    fake.started(made)
    machine = api.get(made)
    assert machine is not None and machine.state == "running" and machine.hourly_price == 0.91
    spot = api.create(order(api, key, spot=True, n=1))
    assert len(api.machines()) == 2
    fake.refuse("1A100.22V")
    with pytest.raises(CapacityError, match="no 1A100.22V"):
        api.create(order(api, key, "1A100.22V", n=2))
    api.delete(made)
    api.delete(spot)
    api.delete(spot)  # gone already: fine
    assert api.get(made) is None and api.machines() == []
    api.remove_key(str(key))
    assert api.keys() == []
    bodies = fake.bodies("POST", "/instances")
    assert bodies[0]["os_volume"] == {"name": naming.machine_name(POOL, 0), "size": 100}
    with pytest.raises(CredentialsError, match="refused"):
        wrong(api).machines()
    assert fake.violations == []


def wrong(api: verda.VerdaAPI) -> verda.VerdaAPI:
    """``api`` with a client secret Verda does not know."""
    api._token = None
    api._credentials = {**api._credentials, "client_secret": "wrong"}
    return api


def test_a_wrong_field_name_in_a_client_request_is_named(fake: FakeVerda) -> None:
    api = verda.VerdaAPI()
    key = api.add_key(naming.key_name(POOL), PUBLIC_KEY)
    renamed(api, "/instances", "hostname", "host_name")
    with pytest.raises(CloudAPIError, match="HTTP 400"):
        api.create(order(api, key))
    said = "\n".join(fake.violations)
    assert "verda instances.create (POST /instances)" in said
    assert "'host_name' was unexpected" in said and "'hostname' is a required property" in said


def test_a_wrong_field_name_in_a_fake_answer_is_named(fake: FakeVerda, monkeypatch: pytest.MonkeyPatch) -> None:
    api = verda.VerdaAPI()
    key = api.add_key(naming.key_name(POOL), PUBLIC_KEY)
    made = api.create(order(api, key))
    misspell(fake, monkeypatch, "_instance", "location", "location_code")
    api.get(made)
    said = "\n".join(fake.violations)
    assert "verda instances.get_by_id (GET /instances/{id})" in said and "'location_code' was unexpected" in said


def test_a_delete_verda_reports_as_failed_is_not_taken_for_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PUT /instances`` answers 207 with a result per instance when one failed."""
    monkeypatch.setenv("VERDA_CLIENT_ID", "id")
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "secret")
    api = verda.VerdaAPI()
    results = {"i-1": [{"action": "delete", "instanceId": "i-1", "status": "error", "error": "Instance is locked",
                        "statusCode": 409}],
               "i-2": [{"action": "delete", "instanceId": "i-2", "status": "error", "error": "Instance not found",
                        "statusCode": 404}],
               "i-3": [{"action": "delete", "instanceId": "i-3", "status": "success"}]}
    api._http = Answers(lambda body: results[body["id"][0]])  # type: ignore[assignment]
    with pytest.raises(CloudAPIError, match="did not delete instance i-1: Instance is locked"):
        api.delete("i-1")
    api.delete("i-2")
    api.delete("i-3")
    for answer in results.values():
        assert load("verda").violations("PUT", "/instances", {}, {"action": "delete", "id": ["i"]}, 207, answer) == []


# ---------------------------------------------------------------------------- the SDKs' example answers


class Answers:
    """An ``ApiClient`` stand-in answering every call with ``answer(body or params)``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def call(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return self.answer(kwargs.get("json") or {"path": path, **(kwargs.get("params") or {})})

    def read(self, path: str, what: str) -> Any:
        return self.answer({"path": path})


INSTANCE_TYPE = {
    "id": "01cf5dc1-a5d2-4972-ae4e-d429115d055b", "instance_type": "8V100.48M", "price_per_hour": "5.00",
    "spot_price": "2.50", "serverless_price": "1.25", "serverless_spot_price": "0.75",
    "description": "Dedicated Bare metal Server", "cpu": {"description": "48 CPU 3.5GHz", "number_of_cores": 48},
    "gpu": {"description": "8x NVidia Tesla V100", "number_of_gpus": 8},
    "memory": {"description": "192GB RAM", "size_in_gigabytes": 192},
    "gpu_memory": {"description": "128GB VRAM", "size_in_gigabytes": 128},
    "storage": {"description": "1800GB NVME", "size_in_gigabytes": 1800}, "deploy_warning": "Use updated drivers",
    "best_for": ["Large model inference", "Multi-GPU training"], "model": "V100", "name": "Tesla V100",
    "p2p": "300 GB/s", "currency": "usd", "manufacturer": "NVIDIA", "display_name": "NVIDIA Tesla V100",
    "supported_os": [IMAGE],
}
"""verda-cloud/sdk-python's tests/unit_tests/instance_types/test_instance_types.py answer
(its currency ``eur`` as ``usd``: our client asks for dollars)."""
INSTANCE = {
    "id": "deadc0de-a5d2-4972-ae4e-d429115d055b", "created_at": "whatchalookingatboy?", "status": "running",
    "ip": "1.2.3.4", "cpu": {"description": "super-duper-cpu", "number_of_cores": 6},
    "gpu": {"description": "super-duper-gpu", "number_of_gpus": 1},
    "memory": {"description": "super-duper-memory", "size_in_gigabytes": 32},
    "gpu_memory": {"description": "super-duper-memory", "size_in_gigabytes": 20},
    "storage": {"description": "super-duper-storage", "size_in_gigabytes": 320},
    "hostname": "I'll be your host for today", "description": "hope you enjoy your GPU", "location": "FIN-01",
    "price_per_hour": 0.60, "instance_type": "1V100.6V", "image": IMAGE, "ssh_key_ids": ["12345dc1"],
    "os_volume_id": "46fc0247-8f65-4d8a-ad73-852a8b3dc1d3", "is_spot": True,
}
"""verda-cloud/sdk-python's tests/unit_tests/instances/test_instances.py answer (its spot one)."""


def test_the_sdks_examples_read_as_our_client_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERDA_CLIENT_ID", "id")
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "secret")
    description = load("verda")
    assert description.violations("GET", "/instance-types", {"currency": "usd"}, None, 200, [INSTANCE_TYPE]) == []
    assert description.violations("GET", "/instances/x", {}, None, 200, INSTANCE) == []
    api = verda.VerdaAPI()
    where = [{"location_code": "FIN-01", "availabilities": ["8V100.48M"]}]
    api._http = Answers(lambda asked: {  # type: ignore[assignment]
        "/instance-types": [INSTANCE_TYPE], "/instance-availability": where, "/instances/x": INSTANCE,
    }[asked["path"]])
    [kind] = api.machine_types("FIN-01")
    assert (kind.price, kind.spot_price) == (5.0, 2.5), "prices are text, dollars an hour"
    assert (kind.vcpus, kind.memory_gb, kind.accelerator, kind.accelerator_count) == (48, 192, "NVidia Tesla V100", 8)
    assert kind.accelerator_memory_gb == 16, "gpu_memory is all the GPUs' together: 128 GB over 8"
    machine = api.get("x")
    assert machine is not None
    assert (machine.id, machine.name, machine.ssh_host, machine.state) == (INSTANCE["id"], INSTANCE["hostname"],
                                                                           "1.2.3.4", "running")
    assert (machine.hourly_price, machine.spot, machine.created) == (0.60, True, None), "a created_at not a time"


@pytest.mark.parametrize(("status", "state"), [
    ("no_capacity", "ended"), ("notfound", "ended"), ("discontinued", "ended"), ("deleting", "ended"),
    ("hibernating", "stopped"), ("offline", "stopped"), ("ordered", "starting"), ("validating", "starting"),
])
def test_each_status_the_sdks_name_reads_as_a_state(status: str, state: str) -> None:
    assert verda._machine({**INSTANCE, "status": status}).state == state
