"""Massed Compute's client and fake held to its VM API's OpenAPI document
(tests/cloud/descriptions/massedcompute, see its SOURCE.md): a pool's exchanges (offers,
the default image, a key, a launch, reads, the listing, the termination) validate; a
misspelt field in a request and in an answer each fail naming the operation and the
field; the document's examples read as our client reads them (a price in dollars, as
text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, Description, load
from cloud.fake_cloud import misspell
from cloud.fake_massedcompute import FakeMassedCompute

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.massedcompute import api as massed

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
LAUNCH = {"imageId": 12, "productName": "gpu_1x_a6000", "regionName": "us-central-3", "instanceName": "skyward-one",
          "command": "#!/bin/bash\n", "sshKeys": ["skyward-key"]}


def said(description: Description, method: str, path: str, body: object = None, status: int = 200,
         answer: object = None) -> str:
    return "\n".join(description.violations(method, path, {}, body, status, answer))


def document() -> Any:
    return json.loads((DESCRIPTIONS / "massedcompute" / "vm.v1.json").read_text())


def from_example(schema: Any) -> Any:
    """A value built from the ``example`` of each property the document gives one."""
    if "example" in schema:
        return schema["example"]
    shown = {k: from_example(v) for k, v in schema.get("properties", {}).items()}
    return {k: v for k, v in shown.items() if v not in (None, {})}


def test_the_pin_says_where_it_came_from_and_what_it_corrected() -> None:
    source = (DESCRIPTIONS / "massedcompute" / "SOURCE.md").read_text()
    for needed in ("Repository", "Path", "Commit", "API version", "License", "Fetched"):
        assert needed in source
    extract = document()
    assert "brevdev/cloud" in extract["x-skyward-source"]
    fix, *scheme = extract["x-skyward-fixed"]
    assert fix["was"] == ["image_id", "productName", "regionName"] and fix["now"][0] == "imageId"
    assert [f["at"] for f in scheme] == ["/security", "/components"], "the Bearer key its prose states"


def test_a_request_the_document_does_not_allow_is_named() -> None:
    mc = load("massedcompute")
    made = {"response": "8b52a46b-a892-4fde-925c-6d13226908f7"}
    assert said(mc, "POST", "/instance/launch", LAUNCH, 202, made) == ""
    misspelt = said(mc, "POST", "/instance/launch", {**LAUNCH, "sshKey": ["skyward-key"]}, 202, made)
    assert "POST /instance/launch" in misspelt and "'sshKey' was unexpected" in misspelt
    typed = said(mc, "POST", "/instance/launch", {**LAUNCH, "imageId": "12"}, 202, made)
    assert "field 'imageId'" in typed and "'12' is not of type 'integer'" in typed
    required = said(mc, "POST", "/instance/launch", {"imageId": 12, "productName": "gpu_1x_a6000"}, 202, made)
    assert "'regionName' is a required property" in required
    key = said(mc, "POST", "/ssh-keys", {"name": "k", "public_key": PUBLIC_KEY}, 200, {"sshKey": {"id": "1"}})
    assert "POST /ssh-keys" in key and "'public_key' was unexpected" in key and "'publicKey' is a required" in key
    terminate = said(mc, "POST", "/instance/terminate", {"instanceUuid": "x"}, 202, {})
    assert "'instanceUuid' was unexpected" in terminate and "'instanceUuids' is a required property" in terminate
    assert "is not described" in said(mc, "POST", "/instance/stop", {"instanceUuids": ["x"]})


def test_an_answer_the_document_would_not_produce_is_named() -> None:
    mc = load("massedcompute")
    listed = said(mc, "GET", "/images", answer={"images": [{"id": 12, "name": "Ubuntu 22.04"}]})
    assert "GET /images" in listed and "field 'images[0]'" in listed and "'id', 'name' were unexpected" in listed
    priced = said(mc, "GET", "/instance/abc", answer={"runningInstance": {"uuid": "abc", "product": {
        "name": "gpu_1x_a6000", "price_cents_per_hour": 62}}})
    assert "field 'runningInstance.product'" in priced and "'price_cents_per_hour' was unexpected" in priced
    launched = said(mc, "POST", "/instance/launch", LAUNCH, 202, {"uuid": "abc"})
    assert "'uuid' was unexpected" in launched
    status = said(mc, "POST", "/instance/launch", LAUNCH, 200, {"response": "abc"})
    assert "answer status 200 is not described" in status
    keys = said(mc, "GET", "/ssh-keys", answer={"sshKeys": [{"id": "1", "name": "k", "publicKey": PUBLIC_KEY}]})
    assert "field 'sshKeys[0]'" in keys and "'publicKey' was unexpected" in keys


def test_a_pools_exchanges_with_the_fake_agree_with_the_document(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    fake = FakeMassedCompute()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = massed.MassedComputeAPI()
        kinds = {k.name: k for k in api.machine_types("us-central-3")}
        assert kinds["gpu_1x_a6000"].price == 0.62, "62 cents an hour"
        group = naming.key_name("0123456789abcdef")
        key = api.add_key(group, PUBLIC_KEY)
        shown = api.keys()
        assert key is not None and [k.id for k in shown] == [key]
        made = api.create(Order(naming.machine_name("0123456789abcdef", 0), kinds["gpu_1x_a6000"], False, PUBLIC_KEY,
                                key, "", "#!/bin/bash\n", None, group))
        assert fake.machines[made].extra["launch"]["imageId"] == 12, "the first Ubuntu image, by vm_image_id"
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running" and machine.hourly_price == 0.62
        fake.plant(naming.machine_name("fedcba9876543210", 0), "gpu_1x_l40s")
        assert len(api.machines()) == 2
        fake.refuse("gpu_1x_a6000")
        with pytest.raises(Exception, match="gpu_1x_a6000"):
            api.create(Order(naming.machine_name("0123456789abcdef", 1), kinds["gpu_1x_a6000"], False, PUBLIC_KEY,
                             None, "12", "", None, group))
        api.delete(made)
        assert api.get(made) is None
        api.remove_key(key)
        assert api.keys() == []
        assert fake.violations == []
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_fake_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeMassedCompute()
    misspell(fake, monkeypatch, "_view", "os_booted", "os_boot")
    fake.serve_here(monkeypatch, tmp_path)
    try:
        fake.plant(naming.machine_name("fedcba9876543210", 0), "gpu_1x_l40s")
        massed.MassedComputeAPI().machines()
        [violation] = fake.violations
        assert "GET /instance" in violation and "field 'runningInstances[0]'" in violation and "'os_boot'" in violation
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_client_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeMassedCompute()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        monkeypatch.setattr(massed.MassedComputeAPI, "KEYS", massed.KeyCollection(
            "/ssh-keys", "id", "name", "public_key", items="sshKeys", created="sshKey"))
        with pytest.raises(Exception, match="public"):
            massed.MassedComputeAPI().add_key("k", PUBLIC_KEY)
        assert any("POST /ssh-keys" in v and "'public_key' was unexpected" in v for v in fake.violations)
    finally:
        fake.stop()


def test_the_documented_examples_read_as_our_client_reads_them() -> None:
    paths = document()["paths"]
    one = paths["/instance/{uuid}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    instance = from_example(one["properties"]["runningInstance"])
    assert instance["product"]["price_hr"] == "0.990000"
    machine = massed._machine(instance)
    assert (machine.id, machine.name, machine.state, machine.ssh_host, machine.machine_type) == (
        "8b52a46b-a892-4fde-925c-6d13226908f7", "Halloween Test", "running", "1.1.1.1", "gpu_1x_l40")
    assert machine.hourly_price == 0.99, "price_hr is dollars an hour, as text"
    assert machine.created == 1723048903, "created 2024-08-07T16:41:43.000Z"
    listed = paths["/instance"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert massed._machine(from_example(listed["properties"]["runningInstances"]["items"])).hourly_price == 0.99, \
        "the listing's example gives the price as a number"
    launched = paths["/instance/launch"]["post"]["responses"]["202"]["content"]["application/json"]["schema"]
    assert massed._uuid(from_example(launched)) == "8b52a46b-uuid-4fde-xxxx-6d13226908f7", "the 202's response"
    assert massed._uuid({"runningInstance": {}}) is None
