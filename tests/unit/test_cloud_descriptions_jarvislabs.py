"""JarvisLabs' client and fake held to the description derived from its official SDK
(tests/cloud/descriptions/jarvislabs, see its SOURCE.md): a pool's exchanges (GPU types,
a key, a create, reads, the listing, the destroy) validate; a misspelt field in a
request and in an answer each fail naming the operation and the field; the SDK's
regions are the client's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cloud.described import DESCRIPTIONS, Description, load
from cloud.fake_cloud import misspell
from cloud.fake_jarvislabs import FakeJarvisLabs

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.jarvislabs import api as jarvislabs

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
CREATE = {"gpu_type": "A5000", "num_gpus": 1, "hdd": 40, "region": "india-chennai-01", "name": "skyward-one",
          "is_spot": True, "duration": "hour", "disk_type": "ssd", "http_ports": "", "script_id": None,
          "script_args": "", "fs_id": None, "arguments": ""}
INSTANCE = {"machine_id": 1001, "name": "skyward-one", "status": "Running", "ssh_str": "ssh -p 11014 root@sshe.jarvislabs.ai",
            "gpu_type": "A5000", "num_gpus": 1, "region": "india-chennai-01", "template": "pytorch", "is_spot": True,
            "cost": 0.29}


def said(description: Description, method: str, path: str, query: dict[str, str] | None = None, body: object = None,
         status: int = 200, answer: object = None) -> str:
    return "\n".join(description.violations(method, path, query or {}, body, status, answer))


def test_the_pin_says_where_it_came_from() -> None:
    source = (DESCRIPTIONS / "jarvislabs" / "SOURCE.md").read_text()
    for needed in ("Repository", "Path", "Commit", "API version", "License", "Fetched", "derived by hand"):
        assert needed in source
    document = json.loads((DESCRIPTIONS / "jarvislabs" / "sdk.v0.2.17.json").read_text())
    assert "jarvislabsai/jarvislabs@f922b55" in document["x-skyward-source"]


def test_the_clients_regions_are_the_sdks() -> None:
    document = json.loads((DESCRIPTIONS / "jarvislabs" / "sdk.v0.2.17.json").read_text())
    published = {k: v.rstrip("/") for k, v in document["x-skyward-regions"].items() if not k.startswith("x-")}
    assert jarvislabs.REGION_URLS == published, "india-01 (backendprod) is gone; india-chennai-01 took its place"
    assert jarvislabs.READS == "india-noida-01", "the SDK's default region"


def test_a_request_the_sdk_does_not_send_is_named() -> None:
    jl = load("jarvislabs")
    made = {"success": True, "machine_id": 1001}
    assert said(jl, "POST", "/templates/pytorch/create", body=CREATE, answer=made) == ""
    misspelt = said(jl, "POST", "/templates/pytorch/create", body={**CREATE, "spot": True}, answer=made)
    assert "instances.create" in misspelt and "'spot' was unexpected" in misspelt
    missing = said(jl, "POST", "/templates/pytorch/create", body={k: v for k, v in CREATE.items() if k != "duration"},
                   answer=made)
    assert "'duration' is a required property" in missing
    assert "field 'duration'" in said(jl, "POST", "/templates/pytorch/create", body={**CREATE, "duration": "week"},
                                      answer=made)
    key = said(jl, "POST", "/ssh/", body={"public_key": PUBLIC_KEY, "key_name": "k"}, answer={"success": True})
    assert "ssh_keys.add" in key and "'public_key' was unexpected" in key
    destroy = said(jl, "POST", "/misc/destroy", {"id": "1001"}, answer={"success": True})
    assert "query parameter 'id' is not described" in destroy and "'machine_id' is required" in destroy
    assert "is not described" in said(jl, "POST", "/misc/pause", {"machine_id": "1001"})


def test_an_answer_the_sdk_would_not_read_is_named() -> None:
    jl = load("jarvislabs")
    assert said(jl, "GET", "/users/fetch/1001", answer={"success": True, "instance": INSTANCE}) == ""
    misspelt = said(jl, "GET", "/users/fetch/1001", answer={"success": True, "instance": {**INSTANCE, "ssh": "x"}})
    assert "instances.get" in misspelt and "field 'instance'" in misspelt and "'ssh' was unexpected" in misspelt
    untyped = said(jl, "GET", "/users/fetch", answer={"success": True, "instances": [{**INSTANCE, "machine_id": None}]})
    assert "field 'instances[0].machine_id'" in untyped
    no_template = {k: v for k, v in INSTANCE.items() if k != "template"}
    assert said(jl, "GET", "/users/fetch/1001", answer={"success": True, "instance": {**no_template, "framework": "x"}}) \
        == "", "framework is template's alias"
    assert "'template' is a required property" in said(jl, "GET", "/users/fetch/1001",
                                                       answer={"success": True, "instance": no_template})
    meta = said(jl, "GET", "/misc/server_meta", answer={"server_meta": [{"gpu_type": "L4", "region": "x", "price": 1}]})
    assert "server_meta" in meta and "'price' was unexpected" in meta
    keys = said(jl, "GET", "/ssh/", answer=[{"ssh_key": PUBLIC_KEY, "name": "k", "key_id": "1"}])
    assert "ssh_keys.list" in keys and "'key_name' is a required property" in keys


def test_a_pools_exchanges_with_the_fake_agree_with_the_sdk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeJarvisLabs()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        for template, region, gpu in (("pytorch", "india-chennai-01", "1x A5000"), ("vm", "india-noida-01", "1x A6000")):
            api = jarvislabs.JarvisLabsAPI(template)
            kinds = {k.name: k for k in api.machine_types(region)}
            group = naming.key_name("0123456789abcdef")
            key = api.add_key(group, PUBLIC_KEY)
            shown = api.keys()
            assert key is not None and [k.id for k in shown] == [key]
            made = api.create(Order(naming.machine_name("0123456789abcdef", 0), kinds[gpu], template != "vm",
                                    PUBLIC_KEY, key, template, "", None, group))
            fake.started(made)
            machine = api.get(made)
            assert machine is not None and machine.state == "running"
            planted = fake.plant(naming.machine_name("fedcba9876543210", 0), "1x L4")
            assert len(api.machines()) == 2
            api.delete(made)
            assert api.get(made) is None
            fake.delete(planted.id)
            api.remove_key(key)
            assert api.keys() == []
        assert fake.violations == []
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_fake_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeJarvisLabs()
    misspell(fake, monkeypatch, "_view", "ssh_str", "ssh_string")
    fake.serve_here(monkeypatch, tmp_path)
    try:
        fake.plant(naming.machine_name("fedcba9876543210", 0), "1x L4")
        jarvislabs.JarvisLabsAPI("pytorch").machines()
        [violation] = fake.violations
        assert "instances.list" in violation and "field 'instances[0]'" in violation and "'ssh_string'" in violation
    finally:
        fake.stop()


def test_a_planted_wrong_field_in_the_client_fails_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeJarvisLabs()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        monkeypatch.setattr(jarvislabs.JarvisLabsAPI, "KEYS", jarvislabs.KeyCollection("/ssh/", "key_id", "name", "ssh_key"))
        with pytest.raises(Exception, match="name"):
            jarvislabs.JarvisLabsAPI("pytorch").add_key("k", PUBLIC_KEY)
        assert any("ssh_keys.add" in v and "'name' was unexpected" in v for v in fake.violations)
    finally:
        fake.stop()
