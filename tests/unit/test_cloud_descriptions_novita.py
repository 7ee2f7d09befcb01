"""Novita's client and fake held to the description derived from its API reference
(tests/cloud/descriptions/novita, see its SOURCE.md): a pool's exchanges (products, a
create, reads, the paged listing, the delete) validate; a misspelt field in a request and
in an answer each fail naming the operation and the field; a product as the reference
shapes it (a spot price as text) reads with the right unit. The reference's pages carry
no example with values, only placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, Description, load
from cloud.fake_cloud import misspell
from cloud.fake_novita import PRODUCTS, FakeNovita

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.novita import api as novita

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
CREATE = {"name": "skyward-one", "productId": "p-l4", "gpuNum": 1, "rootfsSize": 50, "imageUrl": "python:3.12",
          "kind": "gpu", "ports": "22/tcp", "envs": [{"key": "PUBLIC_KEY", "value": PUBLIC_KEY}]}


def said(description: Description, method: str, path: str, query: dict[str, str] | None = None, body: object = None,
         status: int = 200, answer: object = None) -> str:
    return "\n".join(description.violations(method, path, query or {}, body, status, answer))


def test_the_pin_says_where_it_came_from() -> None:
    source = (DESCRIPTIONS / "novita" / "SOURCE.md").read_text()
    for needed in ("Repository", "Path", "Commit", "API version", "License", "Fetched", "derived by hand"):
        assert needed in source
    document = json.loads((DESCRIPTIONS / "novita" / "gpu-instance.v1.json").read_text())
    assert "novita.ai/docs/api-reference" in document["x-skyward-source"]


def test_a_request_the_reference_does_not_allow_is_named() -> None:
    nv = load("novita")
    assert said(nv, "POST", "/gpu/instance/create", body=CREATE, answer={"id": "i-1"}) == ""
    misspelt = said(nv, "POST", "/gpu/instance/create", body={**CREATE, "image": "python:3.12"}, answer={"id": "i-1"})
    assert "Create GPU Instance" in misspelt and "'image' was unexpected" in misspelt
    missing = said(nv, "POST", "/gpu/instance/create", body={k: v for k, v in CREATE.items() if k != "kind"})
    assert "'kind' is a required property" in missing
    billing = said(nv, "POST", "/gpu/instance/create", body={**CREATE, "billingMode": "preemptible"})
    assert "field 'billingMode'" in billing
    env = said(nv, "POST", "/gpu/instance/create", body={**CREATE, "envs": [{"name": "PUBLIC_KEY", "value": "k"}]})
    assert "field 'envs[0]'" in env and "'name' was unexpected" in env
    paged = said(nv, "GET", "/gpu/instances", {"pageSize": "100"}, answer={"instances": []})
    assert "List Instances" in paged and "'pageNum' is required" in paged
    assert "query parameter 'page' is not described" in said(nv, "GET", "/gpu/instances",
                                                             {"pageSize": "10", "pageNum": "1", "page": "2"})
    assert "'instanceId' is required" in said(nv, "GET", "/gpu/instance", answer={})
    assert "'instanceId' is a required property" in said(nv, "POST", "/gpu/instance/delete", body={"id": "i-1"})


def test_an_answer_the_reference_would_not_produce_is_named() -> None:
    nv = load("novita")
    product = {**PRODUCTS[0], "maxGpuNum": 4}
    extra = said(nv, "GET", "/products", answer={"data": [product]})
    assert "List GPU Products" in extra and "field 'data[0]'" in extra and "'maxGpuNum' was unexpected" in extra
    assert "field 'data[0].spotPrice'" in said(nv, "GET", "/products", answer={"data": [{**PRODUCTS[0], "spotPrice": 17000}]})
    fake = FakeNovita()
    machine = fake.plant("skyward-one", "p-l4")
    shown = fake._instance(machine)
    assert said(nv, "GET", "/gpu/instance", {"instanceId": machine.id}, answer=shown) == ""
    priced = said(nv, "GET", "/gpu/instance", {"instanceId": machine.id}, answer={**shown, "gpuPrice": 35000})
    assert "Get Instance" in priced and "'gpuPrice' was unexpected" in priced
    typed = said(nv, "GET", "/gpu/instance", {"instanceId": machine.id}, answer={**shown, "gpuNum": 1})
    assert "field 'gpuNum'" in typed and "is not of type 'string'" in typed
    listed = said(nv, "GET", "/gpu/instances", {"pageSize": "10", "pageNum": "1"},
                  answer={"instances": [{**fake._listed(machine), "productName": None}]})
    assert "field 'instances[0].productName'" in listed


def test_a_pools_exchanges_with_the_fake_agree_with_the_reference(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    fake = FakeNovita()
    fake.serve_here(monkeypatch, tmp_path)
    monkeypatch.setattr(novita, "PAGE_SIZE", 2)
    try:
        api = novita.NovitaAPI()
        kinds = {k.name: k for k in api.machine_types("US-CA-06")}
        l4 = kinds["1x L4 24GB"]
        assert (l4.price, l4.spot_price) == (0.35, 0.17), "1/100,000 USD an hour; the spot price is text"
        made = api.create(Order(naming.machine_name("0123456789abcdef", 0), l4, True, PUBLIC_KEY, None, "python:3.12",
                                "", None, "g"))
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running" and machine.ssh_host is not None
        for n in range(3):
            fake.plant(naming.machine_name("fedcba9876543210", n), "p-4090")
        assert len(api.machines()) == 4, "two pages of two"
        api.delete(made)
        assert api.get(made) is None
        assert fake.violations == []
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_fake_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeNovita()
    misspell(fake, monkeypatch, "_listed", "productName", "productname")
    fake.serve_here(monkeypatch, tmp_path)
    try:
        fake.plant(naming.machine_name("fedcba9876543210", 0), "p-4090")
        novita.NovitaAPI().machines()
        assert any("List Instances" in v and "field 'instances[0]'" in v and "'productname'" in v for v in fake.violations)
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_client_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeNovita()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = novita.NovitaAPI()
        calls = api._http.call

        def misspelt(method: str, path: str, what: str, **kwargs: Any) -> Any:
            if method == "POST" and "json" in kwargs:
                kwargs["json"] = {("instanceID" if k == "instanceId" else k): v for k, v in kwargs["json"].items()}
            return calls(method, path, what, **kwargs)

        monkeypatch.setattr(api._http, "call", misspelt)
        with pytest.raises(Exception, match="instanceID"):
            api.delete("i-1")
        assert any("Delete Instance" in v and "'instanceID' was unexpected" in v for v in fake.violations)
    finally:
        fake.stop()


def test_a_product_as_the_reference_shapes_it_reads_with_the_right_units() -> None:
    product = {**PRODUCTS[2], "spotPrice": "80000"}
    assert novita._dollars(product, "price", 2) == 3.2, "160000 / 100,000 USD an hour, times two GPUs"
    assert novita._dollars(product, "spotPrice", 1) == 0.8, "a spot price written as text"
    assert (novita._gpu(product["name"]), novita._memory(product["name"])) == ("A100", 80.0)
