"""Vast.ai's client and fake held to Vast.ai's own OpenAPI document
(tests/cloud/descriptions/vastai): a pool's exchanges (search, rent, attach the key, read,
list every page, destroy) make no violation; a misspelt field in a request or an answer is
one naming it; the documented offer reads as our client reads it, in the units the
document gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, load
from cloud.fake_vastai import PAGE, FakeVastAI

from skyward.providers.cloud.api import Order
from skyward.providers.vastai import api as vastai

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
RENT = {"image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "label": "skyward-one", "disk": 50, "runtype": "ssh_direct"}
"""An ask accepted as the client accepts one."""


def said(method: str, path: str, body: Any = None, status: int = 200, answer: Any = None,
         query: dict[str, str] | None = None) -> str:
    return "\n".join(load("vastai").violations(method, path, query or {}, body, status, answer))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    running = FakeVastAI().serve_here(monkeypatch, tmp_path)
    yield running
    running.stop()


def test_a_pools_exchanges_agree_with_vasts_description(fake: FakeVastAI) -> None:
    api = vastai.VastAPI()
    kinds = {k.name: k for k in api.machine_types(None)}
    kind = kinds["1x L4 (Sweden, SE)"]
    made = [api.create(Order(f"skyward-{n}", kind, spot, PUBLIC_KEY, None, RENT["image"], ""))
            for n, spot in enumerate((False, True))]
    fake.started(made[0])
    machine = api.get(made[0])
    assert machine is not None and machine.state == "running" and machine.ssh_host and machine.ssh_port == 22
    for n in range(2 * PAGE):  # the list is paged: every page is read
        fake.plant(f"other-{n}", "planted")
    assert len(api.machines()) == 2 * PAGE + 2
    pages = [r for r in fake.requests if r.path.startswith("/api/v1/instances")]
    assert len(pages) >= 3
    for one in made:
        api.delete(one)
        assert api.get(one) is None
    assert [r.method for r in fake.requests if r.path == "/bundles/"] == ["POST"]
    assert fake.violations == []


def test_a_taken_ask_is_gone_as_vast_says_it(fake: FakeVastAI) -> None:
    """Vast.ai answers an ask someone took with 410 no_such_ask; the client takes the next."""
    api = vastai.VastAPI()
    kind = {k.name: k for k in api.machine_types(None)}["1x L4 (Sweden, SE)"]
    fake.rented[501] = "someone"
    made = api.create(Order("skyward-0", kind, False, PUBLIC_KEY, None, RENT["image"], ""))
    assert fake.machines[made].extra["ask"]["id"] == 502
    assert fake.violations == []


# ---------------------------------------------------------------------------- the check can fail


def test_a_wrong_field_in_a_request_is_named() -> None:
    assert said("PUT", "/asks/501/", RENT, 200, {"success": True, "new_contract": 7}) == ""
    found = said("PUT", "/asks/501/", {**RENT, "client_id": "me"}, 200, {"success": True, "new_contract": 7})
    assert "createInstance" in found and "'client_id'" in found, found
    found = said("POST", "/bundles/", {"rentable": {"eq": True}, "orderby": [["dph_total", "asc"]]}, 200, {"offers": []})
    assert "searchOffers" in found and "'orderby'" in found, found
    found = said("GET", "/api/v1/instances/", query={"limit": "25", "page": "2"}, answer={"instances": []})
    assert "showInstances" in found and "'page'" in found, found
    assert "is not described" in said("GET", "/bundles/", query={"q": "{}"}, answer={"offers": []})
    assert "is not described" in said("GET", "/instances/", answer={"instances": []})


def test_a_wrong_field_in_an_answer_is_named(fake: FakeVastAI) -> None:
    machine = fake.add("skyward-one", "1x L4", False, RENT["image"], PUBLIC_KEY, 0.31, ask=fake_ask())
    shown = fake._instance(machine)
    assert said("GET", "/instances/1001/", answer={"instances": shown}) == ""
    found = said("GET", "/instances/1001/", answer={"instances": {**shown, "ssh_prot": 22}})
    assert "showInstance" in found and "field 'instances'" in found and "'ssh_prot'" in found, found
    found = said("GET", "/api/v1/instances/", answer={"instances": [{**shown, "public_ip": "192.0.2.1"}]})
    assert "showInstances" in found and "'instances[0]'" in found and "'public_ip'" in found, found
    found = said("PUT", "/asks/501/", RENT, 400, {"success": False, "error": "no_such_ask", "msg": "gone"})
    assert "'error'" in found and "no_such_ask" in found, found


def fake_ask() -> dict[str, Any]:
    from cloud.fake_vastai import ASKS

    return ASKS[0]


# ---------------------------------------------------------------------------- the documented example


def test_the_documented_offer_reads_in_the_documents_units(monkeypatch: pytest.MonkeyPatch) -> None:
    """The document's example offer (its example writes ``offers`` as one object; the
    schema says a list): GPU and CPU RAM in MB, disk in GB, prices in dollars an hour."""
    document = json.loads((DESCRIPTIONS / "vastai" / "api.json").read_text())
    offer = document["paths"]["/api/v0/bundles"]["post"]["responses"]["200"]["content"]["application/json"][
        "example"]["offers"]
    assert said("POST", "/bundles/", vastai.QUERY, 200, {"offers": [offer]}) == ""
    monkeypatch.setenv("VAST_API_KEY", "k")
    api = vastai.VastAPI()
    monkeypatch.setattr(api._http, "call", lambda *a, **k: {"offers": [offer]})
    [kind] = api.machine_types(None)
    assert kind.name == "4x Imaginary RTX 9999 (Atlantis, AT)" and kind.ref == "12345678"
    assert (kind.accelerator_count, kind.accelerator_memory_gb, kind.memory_gb) == (4, 24, 64)  # 24576 MB, 65536 MB
    assert (kind.vcpus, kind.disk_gb, kind.price, kind.spot_price) == (32, 2048.5, 0.234567, 0.111111)
    assert kind.region == "Atlantis, AT" and kind.architecture == "x86_64"


def test_an_instance_reached_through_the_proxy_is_not_given_the_public_address() -> None:
    """Without a direct port for 22, SSH goes through Vast.ai's proxy (ssh_host, ssh_port),
    as its CLI pairs them; the client once paired the public address with the proxy's port."""
    proxied = vastai._machine({"id": 7, "actual_status": "running", "public_ipaddr": "203.0.113.42",
                               "ssh_host": "ssh2281.vast.ai", "ssh_port": 10882, "ports": None})
    assert (proxied.ssh_host, proxied.ssh_port, proxied.state) == ("ssh2281.vast.ai", 10882, "running")
    direct = vastai._machine({"id": 7, "actual_status": "running", "public_ipaddr": "203.0.113.42",
                              "ssh_host": "ssh2281.vast.ai", "ssh_port": 10882,
                              "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40022"}]}})
    assert (direct.ssh_host, direct.ssh_port) == ("203.0.113.42", 40022)
