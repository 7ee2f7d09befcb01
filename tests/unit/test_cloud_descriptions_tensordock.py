"""TensorDock's client and fake held to the description derived from its v2 documentation
pages (tests/cloud/descriptions/tensordock, see its SOURCE.md): a pool's exchanges (the
locations, a create, reads, the listing, the delete) validate; a misspelt field in a
request and in an answer each fail naming the operation and the field; the pages'
examples (a location's GPU, a read instance, a created one, both listing shapes) read
through our parser with the right units."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, Description, load
from cloud.fake_cloud import misspell
from cloud.fake_tensordock import FakeTensorDock

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.tensordock import api as tensordock

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
ATTRIBUTES: dict[str, Any] = {
    "name": "skyward-one", "type": "virtualmachine", "image": "ubuntu2404",
    "resources": {"vcpu_count": 4, "ram_gb": 16, "storage_gb": 100, "gpus": {"geforcertx4090-pcie-24gb": {"count": 1}}},
    "location_id": "loc-uuid-12345", "ssh_key": PUBLIC_KEY,
    "port_forwards": [{"internal_port": 22, "external_port": 0}],
    "cloud_init": {"write_files": [{"path": "/var/lib/boot.sh", "content": "#!/bin/bash\n"}], "runcmd": ["bash x"]},
}
CREATED = {"data": {"type": "virtualmachine", "id": "instance-uuid", "name": "skyward-one", "status": "running"}}
# The pages' examples, as they show them (placeholders where the page has them).
LOCATION = {
    "id": "loc-uuid-12345", "city": "Austin", "stateprovince": "Texas", "country": "United States", "tier": 3,
    "gpus": [{
        "v0Name": "h100-sxm5-80gb", "displayName": "H100 SXM5 80GB", "max_count": 8, "price_per_hr": 2.2,
        "resources": {"max_vcpus": 128, "max_ram_gb": 300, "max_storage_gb": 1000},
        "pricing": {"per_vcpu_hr": 0.003, "per_gb_ram_hr": 0.002, "per_gb_storage_hr": 0.00005},
        "network_features": {"dedicated_ip_available": True, "port_forwarding_available": True,
                             "network_storage_available": False},
    }],
}
INSTANCE = {"type": "instance", "id": "550e8400-e29b-41d4-a716-446655440000", "name": "My Instance",
            "status": "running", "ipAddress": "203.0.113.7",
            "portForwards": [{"internal_port": 22, "external_port": 20000},
                             {"internal_port": 80, "external_port": 20001}]}
LISTED = {"data": {"instances": [{"type": "VM", "id": "550e8400-e29b-41d4-a716-446655440000",
                                  "attributes": {"name": "My Instance", "status": "running"}}]}}
LISTED_AS_GETTING_STARTED_SHOWS = {"data": {"type": "list", "id": "instances", "attributes": {"instances": [
    {"type": "instance", "id": "550e8400-e29b-41d4-a716-446655440000",
     "attributes": {"name": "My Instance", "status": "running", "region": "us-east-1"}}]}}}


def said(description: Description, method: str, path: str, body: object = None, status: int = 200,
         answer: object = None) -> str:
    return "\n".join(description.violations(method, path, {}, body, status, answer))


def create(attributes: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"type": "virtualmachine", "attributes": attributes}}


def test_the_pin_says_where_it_came_from() -> None:
    source = (DESCRIPTIONS / "tensordock" / "SOURCE.md").read_text()
    for needed in ("Repository", "Path", "Commit", "API version", "License", "Fetched", "derived by hand", "guess"):
        assert needed in source
    document = json.loads((DESCRIPTIONS / "tensordock" / "api.v2.json").read_text())
    assert "dashboard.tensordock.com/api/docs" in document["x-skyward-source"]
    assert {op.id for op in load("tensordock").operations} == {
        "List Available Locations", "List Instances", "Create Instance", "Get Instance", "Delete Instance"}


def test_the_pages_examples_validate() -> None:
    td = load("tensordock")
    assert said(td, "GET", "/locations", answer={"data": {"locations": [LOCATION]}}) == ""
    assert said(td, "POST", "/instances", body=create(ATTRIBUTES), answer=CREATED) == ""
    assert said(td, "GET", f"/instances/{INSTANCE['id']}", answer=INSTANCE) == ""
    assert said(td, "GET", "/instances", answer=LISTED) == ""
    assert said(td, "GET", "/instances", answer=LISTED_AS_GETTING_STARTED_SHOWS) == ""
    deleted = {"data": {"type": "success", "attributes": {"message": "Instance deleted successfully"}}}
    assert said(td, "DELETE", "/instances/i-1", answer=deleted) == ""


def test_a_request_the_pages_do_not_allow_is_named() -> None:
    td = load("tensordock")
    misspelt = said(td, "POST", "/instances", body=create({**ATTRIBUTES, "sshKey": PUBLIC_KEY}), answer=CREATED)
    assert "Create Instance" in misspelt and "field 'data.attributes'" in misspelt
    assert "'sshKey' was unexpected" in misspelt
    protocol = said(td, "POST", "/instances", body=create(
        {**ATTRIBUTES, "port_forwards": [{"protocol": "tcp", "internal_port": 22, "external_port": 0}]}))
    assert "field 'data.attributes.port_forwards[0]'" in protocol and "'protocol' was unexpected" in protocol
    small = said(td, "POST", "/instances", body=create(
        {**ATTRIBUTES, "resources": {**ATTRIBUTES["resources"], "storage_gb": 50}}))
    assert "field 'data.attributes.resources.storage_gb'" in small and "less than the minimum of 100" in small
    counted = said(td, "POST", "/instances", body=create(
        {**ATTRIBUTES, "resources": {**ATTRIBUTES["resources"], "gpus": {"h100-sxm5-80gb": {"amount": 1}}}}))
    assert "field 'data.attributes.resources.gpus.h100-sxm5-80gb'" in counted and "'count' is a required" in counted
    typed = said(td, "POST", "/instances", body={"data": {"type": "vm", "attributes": ATTRIBUTES}})
    assert "field 'data.type'" in typed
    assert "the request body is required" in said(td, "POST", "/instances")
    assert "the request has a body" in said(td, "DELETE", "/instances/i-1", body={"force": True})


def test_an_answer_the_pages_would_not_produce_is_named() -> None:
    td = load("tensordock")
    priced = said(td, "GET", "/instances/i-1", answer={**INSTANCE, "rateHourly": 0.4})
    assert "Get Instance" in priced and "'rateHourly' was unexpected" in priced
    forwards = said(td, "GET", "/instances/i-1", answer={**INSTANCE, "portForwards": {"22": 20000}})
    assert "field 'portForwards'" in forwards and "is not of type 'array'" in forwards
    listed = said(td, "GET", "/instances", answer={"data": {"instances": [
        {"type": "VM", "id": "i-1", "attributes": {"name": "x", "status": "running", "ipAddress": "203.0.113.7"}}]}})
    assert "List Instances" in listed and "field 'data.instances[0].attributes'" in listed and "'ipAddress'" in listed
    gpu = {**LOCATION["gpus"][0], "price_per_hr": "2.2"}
    typed = said(td, "GET", "/locations", answer={"data": {"locations": [{**LOCATION, "gpus": [gpu]}]}})
    assert "field 'data.locations[0].gpus[0].price_per_hr'" in typed and "is not of type 'number'" in typed


def test_a_pools_exchanges_with_the_fake_agree_with_the_pages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeTensorDock()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = tensordock.TensorDockAPI()
        kinds = {k.name: k for k in api.machine_types("Texas")}
        kind = kinds["1x geforcertx4090-pcie-24gb 4vCPU 16GB"]
        assert round(kind.price, 4) == 0.399, "0.35/GPU + 4 x 0.003/vCPU + 16 x 0.002/GB + 100 GB x 0.00005"
        made = api.create(Order(naming.machine_name("0123456789abcdef", 0), kind, False, PUBLIC_KEY, None,
                                "ubuntu2404", "#!/bin/bash\n", 50, "g"))
        booting = api.get(made)
        assert booting is not None and booting.state == "starting" and booting.ssh_host is None
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running" and (machine.ssh_host, machine.ssh_port) == (
            fake.machines[made].address, 22)
        fake.plant(naming.machine_name("fedcba9876543210", 0), "h100-sxm5-80gb")
        listed = api.machines()
        assert sorted(m.name for m in listed) == sorted(m.name for m in fake.live())
        assert all(m.state == "starting" for m in listed), "a listed VM carries no address: only get() shows one"
        api.delete(made)
        assert api.get(made) is None
        api.delete(made)
        assert fake.violations == []
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_fake_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeTensorDock()
    misspell(fake, monkeypatch, "_instance", "portForwards", "portforwards")
    fake.serve_here(monkeypatch, tmp_path)
    try:
        planted = fake.plant(naming.machine_name("fedcba9876543210", 0), "h100-sxm5-80gb")
        tensordock.TensorDockAPI().get(planted.id)
        assert any("Get Instance" in v and "'portforwards' was unexpected" in v for v in fake.violations)
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_client_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeTensorDock()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = tensordock.TensorDockAPI()
        kind = api.machine_types("Texas")[0]
        calls = api._http.call

        def misspelt(method: str, path: str, what: str, **kwargs: Any) -> Any:
            if method == "POST" and "json" in kwargs:
                attributes = kwargs["json"]["data"]["attributes"]
                attributes["sshKey"] = attributes.pop("ssh_key")
            return calls(method, path, what, **kwargs)

        monkeypatch.setattr(api._http, "call", misspelt)
        with pytest.raises(Exception, match="sshKey"):
            api.create(Order("skyward-one", kind, False, PUBLIC_KEY, None, "ubuntu2404", "", None, "g"))
        assert any("Create Instance" in v and "'sshKey' was unexpected" in v for v in fake.violations)
    finally:
        fake.stop()


def test_the_pages_examples_read_with_the_right_units() -> None:
    place = "Austin, Texas, United States"
    kinds = {k.name: k for k in tensordock._kinds("loc-uuid-12345", place, LOCATION["gpus"][0])}
    one = kinds["1x h100-sxm5-80gb 4vCPU 16GB"]
    assert round(one.price, 6) == round(2.2 + 4 * 0.003 + 16 * 0.002 + 100 * 0.00005, 6), "USD an hour, per resource"
    assert (one.accelerator, one.accelerator_memory_gb, one.disk_gb, one.ref) == (
        "H100 SXM5", 80.0, 1000.0, "loc-uuid-12345 h100-sxm5-80gb")
    eight = kinds["8x h100-sxm5-80gb 128vCPU 296GB"]
    assert (eight.vcpus, eight.memory_gb) == (128, 296), "capped by max_vcpus and max_ram_gb (in 8 GB steps)"
    machine = tensordock._machine(INSTANCE)
    assert (machine.state, machine.ssh_host, machine.ssh_port) == ("running", "203.0.113.7", 20000), "forwarded to 22"
    assert tensordock._machine({**INSTANCE, "status": "StoppedDisassociated"}).state == "stopped"
    assert tensordock._flat(CREATED["data"])["id"] == "instance-uuid"


@pytest.mark.parametrize("answer", [LISTED, LISTED_AS_GETTING_STARTED_SHOWS],
                         ids=["instance-management", "getting-started"])
def test_both_listing_shapes_the_pages_show_read_as_the_vms(answer: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORDOCK_API_TOKEN", "t")
    api = tensordock.TensorDockAPI()
    monkeypatch.setattr(api._http, "call", lambda method, path, what, **kwargs: answer)
    [vm] = api.machines()
    assert (vm.id, vm.name, vm.state) == ("550e8400-e29b-41d4-a716-446655440000", "My Instance", "starting")
