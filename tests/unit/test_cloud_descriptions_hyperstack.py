"""Hyperstack's client and fake held to Hyperstack's own OpenAPI document of its Infrahub
API (tests/cloud/descriptions/hyperstack, as NexGenCloud's Go SDK carries it): a pool's
exchanges (offers, environment, keypair, a VM with its security rules, every page of the
lists, no capacity, a refused key, the teardown) make no violation; a wrong field name
planted in a request the client sends, or in an answer the fake gives, is named; the
document's example answers read as our client reads them (GB, dollars an hour per GPU)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, load
from cloud.fake_cloud import misspell
from cloud.fake_hyperstack import FakeHyperstack

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.cloud.errors import CapacityError, CredentialsError
from skyward.providers.hyperstack import api as hyperstack

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
POOL = "0123456789abcdef"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHyperstack]:
    running = FakeHyperstack().serve_here(monkeypatch, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def order(api: hyperstack.HyperstackAPI, key: str | None, n: int = 0) -> Order:
    kinds = {k.name: k for k in api.machine_types("CANADA-1")}
    group = naming.key_name(POOL)
    return Order(naming.machine_name(POOL, n), kinds["n3-RTX-A6000x1"], False, PUBLIC_KEY, key, None, "#!/bin/sh\n",
                 None, group)


def renamed(api: hyperstack.HyperstackAPI, path: str, old: str, new: str) -> None:
    """Plant a wrong field name in the bodies ``api`` sends to ``path``: ``old`` sent as ``new``."""
    call = api._http.call

    def planted(method: str, at: str, what: str, **kwargs: Any) -> object:
        body = kwargs.get("json")
        if at == path and isinstance(body, dict) and old in body:
            kwargs["json"] = {new if k == old else k: v for k, v in body.items()}
        return call(method, at, what, **kwargs)

    api._http.call = planted  # type: ignore[method-assign]


def test_a_pools_exchanges_agree_with_hyperstacks_openapi_document(fake: FakeHyperstack,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hyperstack, "PAGE", 1)  # every list read page by page
    api = hyperstack.HyperstackAPI("CANADA-1")
    kinds = {k.name: k for k in api.machine_types("CANADA-1")}
    assert (kinds["n3-RTX-A6000x2"].price, kinds["n3-RTX-A6000x1-spot"].spot_price) == (1.0, 0.25)
    group = naming.key_name(POOL)
    key = api.add_key(group, PUBLIC_KEY)
    other = api.add_key(naming.key_name("fedcba9876543210"), PUBLIC_KEY)
    registered = api.keys()
    assert sorted(k.id for k in registered) == sorted([str(key), str(other)]), "both pages of keypairs"
    made = api.create(order(api, key))
    assert fake.bodies("POST", "/core/virtual-machines")[-1]["image_name"] == "Ubuntu Server 24.04 LTS R570 CUDA 12.8", (
        "the newest Ubuntu with CUDA, though Hyperstack's images carry no creation time"
    )
    machine = api.get(made)
    assert machine is not None and machine.state == "starting" and machine.ssh_host is None
    fake.started(made)
    machine = api.get(made)
    assert machine is not None and machine.state == "running" and machine.ssh_host == machine.private_ip
    fake.plant(naming.machine_name("fedcba9876543210", 0), "n3-L40x1")
    assert len(api.machines()) == 2, "both pages of VMs"
    fake.refuse("n3-RTX-A6000x1")
    with pytest.raises(CapacityError, match="no n3-RTX-A6000x1"):
        api.create(order(api, key, 1))
    with pytest.raises(CredentialsError, match="refused"):
        hyperstack.HyperstackAPI("CANADA-1", api_key="wrong").machines()
    api.delete(made)
    assert api.get(made) is None
    api.remove_key(str(key))
    api.remove_key(str(other))
    assert api.keys() == [] and fake.environments == {}, "each keypair's environment (an object) went with it"
    assert fake.violations == []


def test_the_client_finds_a_keypairs_environment_on_a_later_page(fake: FakeHyperstack,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hyperstack, "PAGE", 2)
    api = hyperstack.HyperstackAPI("CANADA-1")
    keys = [api.add_key(naming.key_name(f"{n:x}123456789abcde"), PUBLIC_KEY) for n in range(5)]
    api.remove_key(str(keys[-1]))
    assert sorted(e["name"] for e in fake.environments.values()) == sorted(
        naming.key_name(f"{n:x}123456789abcde") for n in range(4)
    ), "the fifth environment, on the third page, was found and deleted"
    assert fake.violations == []


def test_a_wrong_field_name_in_a_client_request_is_named(fake: FakeHyperstack) -> None:
    api = hyperstack.HyperstackAPI("CANADA-1")
    renamed(api, "/core/keypairs", "public_key", "publickey")
    with pytest.raises(Exception, match="HTTP 400"):
        api.add_key(naming.key_name(POOL), PUBLIC_KEY)
    said = "\n".join(fake.violations)
    assert "hyperstack Import_key_pair (POST /core/keypairs)" in said
    assert "'publickey' was unexpected" in said and "'public_key' is a required property" in said


def test_a_wrong_field_name_in_a_fake_answer_is_named(fake: FakeHyperstack, monkeypatch: pytest.MonkeyPatch) -> None:
    api = hyperstack.HyperstackAPI("CANADA-1")
    key = api.add_key(naming.key_name(POOL), PUBLIC_KEY)
    made = api.create(order(api, key))
    fake.started(made)
    misspell(fake, monkeypatch, "_vm", "floating_ip", "floating_ip_address")
    api.get(made)
    said = "\n".join(fake.violations)
    assert "hyperstack Get_VM (GET /core/virtual-machines/{vm_id})" in said
    assert "field 'instance'" in said and "'floating_ip_address' was unexpected" in said


def test_a_security_rule_without_the_sdks_virtual_machine_id_is_what_the_document_takes() -> None:
    """The SDK's build makes a rule require ``virtual_machine_id``; the extract takes that
    out again (``x-skyward-fixed``), and the client's rules are taken as they are."""
    extract = json.loads((DESCRIPTIONS / "hyperstack" / "infrahub.v1.json").read_text())
    assert [f["was"][-1] for f in extract["x-skyward-fixed"]] == ["virtual_machine_id"]
    body = {"name": "vm", "environment_name": "env", "key_name": "key", "flavor_name": "n3-L40x1", "count": 1,
            "security_rules": hyperstack.security_rules()}
    assert load("hyperstack").violations("POST", "/core/virtual-machines", {}, body, 400,
                                          {"status": False, "message": "no", "error_reason": "no"}) == []


# ---------------------------------------------------------------------------- the document's examples


def example(path: str, method: str = "get") -> Any:
    """The example answer (200) the document gives ``method path``: the SDK's generator
    writes one from each schema (placeholder values of the right types)."""
    extract = json.loads((DESCRIPTIONS / "hyperstack" / "infrahub.v1.json").read_text())
    schema = extract["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    return [schema["items"]["example"]] if schema["type"] == "array" else schema["example"]


class Answers:
    """An ``ApiClient`` stand-in that answers each path with the document's example."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def call(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return self.answers[path]

    def read(self, path: str, what: str) -> Any:
        return self.answers[path]


def test_the_documents_examples_read_as_our_client_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERSTACK_API_KEY", "key")
    api = hyperstack.HyperstackAPI("CANADA-1")
    flavors, book = example("/core/flavors"), example("/pricebook")
    flavor = flavors["data"][0]["flavors"][0]
    book = [{**book[0], "name": flavor["gpu"]}]  # the pricebook's example priced for the flavor's example GPU
    vm = example("/core/virtual-machines/{vm_id}")
    api._http = Answers({"/core/flavors": flavors, "/pricebook": book,  # type: ignore[assignment]
                         "/core/virtual-machines/4": vm, "/core/virtual-machines": {**vm, "instances": [vm["instance"]],
                                                                                     "count": 1}})
    kind = api.machine_types(None)[0]
    assert (kind.name, kind.vcpus, kind.memory_gb, kind.disk_gb, kind.region) == (
        flavor["name"], flavor["cpu"], flavor["ram"], flavor["disk"], flavor["region_name"]
    ), "cpu, ram (GB, a number: the SDK's own fix) and disk (GB) as Hyperstack gives them"
    assert kind.accelerator_count == flavor["gpu_count"] and kind.price == pytest.approx(
        book[0]["value"] * flavor["gpu_count"]
    ), "the pricebook's value is dollars an hour for one GPU"
    machine = api.get("4")
    instance = vm["instance"]
    assert machine is not None
    assert (machine.id, machine.name, machine.ssh_host, machine.private_ip, machine.machine_type) == (
        str(instance["id"]), instance["name"], instance["floating_ip"], instance["fixed_ip"], instance["flavor"]["name"]
    )
    assert machine.state == "starting", "a status other than ACTIVE is not running yet"
    assert machine.created == 948603367.0, "created_at 2000-01-23T04:56:07.000+00:00"
    assert [m.id for m in api.machines()] == [str(instance["id"])]
    # (not checked against the document itself: the generator writes an empty object, a
    # flavor's ``features``, as the text "{}")


def test_an_address_hyperstack_sends_as_null_reads_as_none() -> None:
    """The document does not let ``floating_ip`` be null (the fake leaves it out until
    there is one); the client reads null, as the API may send it, as no address too."""
    machine = hyperstack._machine({"id": 7, "name": "a", "status": "ACTIVE", "floating_ip": None, "fixed_ip": None})
    assert (machine.ssh_host, machine.private_ip, machine.state) == (None, None, "starting")
