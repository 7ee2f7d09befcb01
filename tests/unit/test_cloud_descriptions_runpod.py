"""RunPod's client and fake held to RunPod's own description of its APIs
(tests/cloud/descriptions/runpod): the REST API v1's OpenAPI document for pods, and the
GraphQL schema derived from RunPod's docs and official clients for GPU types and prices. A
pool's exchanges (offers, create, read, list, delete) make no violation; a misspelt field in
a request or in an answer, REST or GraphQL, is one naming it; the documented examples (the
REST document's pod, the GraphQL docs' answers) read as our client reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cloud.described import DESCRIPTIONS, load
from cloud.fake_runpod import FakeRunPod

from skyward.providers.cloud.api import Order
from skyward.providers.runpod import api as runpod

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
POD = {"name": "skyward-one", "imageName": "runpod/pytorch:2.4.0", "gpuTypeIds": ["NVIDIA L4"], "gpuCount": 1,
       "cloudType": "SECURE", "interruptible": False, "ports": ["22/tcp"], "supportPublicIp": True,
       "containerDiskInGb": 50, "env": {"PUBLIC_KEY": PUBLIC_KEY}}
"""A create request as the client sends it."""
GPU = {"id": "NVIDIA L4", "displayName": "L4", "memoryInGb": 24, "secureCloud": True, "communityCloud": False,
       "securePrice": 0.43, "communityPrice": 0, "secureSpotPrice": 0.22, "communitySpotPrice": 0, "maxGpuCount": 8,
       "lowestPrice": {"minVcpu": 4, "minMemory": 16}}
"""A GPU type as the GraphQL API answers the client's query."""


def said(method: str, path: str, body: Any = None, status: int = 200, answer: Any = None) -> str:
    return "\n".join(load("runpod").violations(method, path, {}, body, status, answer))


def graphql(query: str = runpod.GPU_TYPES, answer: Any = None, status: int = 200, **extra: Any) -> str:
    return said("POST", "/graphql", {"query": query, **extra}, status, answer)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    running = FakeRunPod().serve_here(monkeypatch, tmp_path)
    yield running
    running.stop()


@pytest.mark.parametrize("cloud_type", ["secure", "community", "all"])
def test_a_pools_exchanges_agree_with_runpods_description(fake: FakeRunPod, cloud_type: str) -> None:
    api = runpod.RunPodAPI(cloud_type)
    kinds = {k.name: k for k in api.machine_types(None)}
    kind = kinds["2x NVIDIA L4"]
    made = [api.create(Order(f"skyward-{n}", kind, spot, PUBLIC_KEY, None, "runpod/pytorch:2.4.0", ""))
            for n, spot in enumerate((False, True))]
    fake.started(made[0])
    machine = api.get(made[0])
    assert machine is not None and machine.state == "running" and machine.machine_type == "NVIDIA L4"
    assert machine.ssh_host and machine.ssh_port == 22 and machine.created
    assert {m.id for m in api.machines()} == set(made)
    for one in made:
        api.delete(one)
        assert api.get(one) is None
    api.delete(made[0])  # gone already: RunPod answers 400 "Invalid Pod ID" (its document lists no 404)
    sent = [r.body["cloudType"] for r in fake.requests if (r.method, r.path) == ("POST", "/pods")]
    assert set(sent) <= {"SECURE", "COMMUNITY"}, sent
    assert fake.violations == []


def test_cloud_type_all_creates_in_the_cloud_whose_price_it_listed(fake: FakeRunPod) -> None:
    """RunPod's REST API takes SECURE or COMMUNITY, not ALL (the client sent ALL, refused)."""
    api = runpod.RunPodAPI("all")
    kind = {k.name: k for k in api.machine_types(None)}["1x NVIDIA L4"]
    assert kind.price == 0.39 and kind.spot_price == 0.2  # community is cheaper in the fake
    made = api.create(Order("skyward-0", kind, False, PUBLIC_KEY, None, "runpod/pytorch:2.4.0", ""))
    assert [r.body["cloudType"] for r in fake.requests if r.method == "POST" and r.path == "/pods"] == ["COMMUNITY"]
    assert fake.machines[made].price == kind.price
    assert "'ALL' is not one of" in said("POST", "/pods", {**POD, "cloudType": "ALL"}, 201, {"id": "p"})


# ---------------------------------------------------------------------------- the check can fail


def test_a_wrong_field_in_a_rest_request_is_named() -> None:
    assert said("POST", "/pods", POD, 201, {"id": "p1"}) == ""
    wrong = {**{k: v for k, v in POD.items() if k != "gpuTypeIds"}, "gpuTypeId": "NVIDIA L4"}
    found = said("POST", "/pods", wrong, 201, {"id": "p1"})
    assert "CreatePod" in found and "'gpuTypeId'" in found, found


def test_a_wrong_field_in_a_rest_answer_is_named(fake: FakeRunPod) -> None:
    pod = fake._pod(fake.add("skyward-one", "NVIDIA L4", False, "img", PUBLIC_KEY, 0.43))
    assert said("GET", "/pods/p1", answer=pod) == ""
    found = said("GET", "/pods/p1", answer={**pod, "createdAt": "2026-01-01T00:00:00Z"})
    assert "GetPod" in found and "'createdAt'" in found, found
    found = said("GET", "/pods", answer=[{**pod, "gpuTypeId": "NVIDIA L4"}])
    assert "ListPods" in found and "'gpuTypeId'" in found, found


def test_a_wrong_field_in_a_graphql_query_is_named() -> None:
    assert graphql(answer={"data": {"gpuTypes": [GPU]}}) == ""
    found = graphql(runpod.GPU_TYPES.replace("maxGpuCount", "maxGpus"))
    assert "GraphQL" in found and "maxGpus" in found and "GpuType" in found, found
    found = graphql(runpod.GPU_TYPES.replace("gpuCount: 1", "gpus: 1"))
    assert "gpus" in found and "GpuLowestPriceInput" in found, found
    found = graphql("query One($n: Int) { gpuTypes { lowestPrice(input: {gpuCount: $n}) { minVcpu } } }",
                    variables={"n": "two"})
    assert "$n" in found, found


def test_a_wrong_field_in_a_graphql_answer_is_named() -> None:
    misspelt = {**{k: v for k, v in GPU.items() if k != "memoryInGb"}, "memoryInGB": 24}
    found = graphql(answer={"data": {"gpuTypes": [misspelt]}})
    assert "'data.gpuTypes[0].memoryInGB'" in found and "'data.gpuTypes[0].memoryInGb' is missing" in found, found
    found = graphql(answer={"data": {"gpuTypes": [{**GPU, "securePrice": "0.43"}]}})
    assert "'data.gpuTypes[0].securePrice'" in found and "Float" in found, found
    found = graphql(answer={"data": {"gpuTypes": [{**GPU, "lowestPrice": {"minVcpu": 4, "minMem": 16}}]}})
    assert "'data.gpuTypes[0].lowestPrice.minMem'" in found, found
    assert "'errors'" in graphql(answer={"errors": ["no"]})


def test_the_fake_records_what_the_description_would_not_have(fake: FakeRunPod) -> None:
    """The fake answers as it would, and keeps the violation (here: a field RunPod's
    REST document does not give a pod, as the fake once sent)."""
    fake._pod = lambda machine: {"id": machine.id, "gpuTypeId": machine.kind}  # type: ignore[method-assign]
    api = runpod.RunPodAPI("secure")
    kind = api.machine_types(None)[0]
    api.get(api.create(Order("skyward-0", kind, False, PUBLIC_KEY, None, "img", "")))
    assert fake.violations and all("'gpuTypeId'" in v for v in fake.violations), fake.violations


# ---------------------------------------------------------------------------- the documented examples


def _from_example(schema: Any) -> Any:
    """A value built from the ``example`` of each property the document gives one."""
    if "example" in schema:
        return schema["example"]
    shown = {k: _from_example(v) for k, v in schema.get("properties", {}).items()}
    return {k: v for k, v in shown.items() if v not in (None, {})}


def test_the_documented_pod_reads_as_runpod_means_it() -> None:
    document = json.loads((DESCRIPTIONS / "runpod" / "rest.v1.json").read_text())
    schema = document["paths"]["/pods/{podId}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    pod = {**_from_example(schema), "desiredStatus": "RUNNING", "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1}}
    machine = runpod._machine(pod)
    assert (machine.id, machine.state, machine.ssh_host, machine.ssh_port) == (
        "xedezhzb9la3ye", "running", "100.65.0.119", 10341)
    assert machine.hourly_price == 0.74  # dollars an hour (the document's example writes it as text)
    assert machine.machine_type == "NVIDIA GeForce RTX 4090" and machine.spot is False
    assert machine.created == 1720811680.144  # lastStartedAt, 2024-07-12T19:14:40.144Z


DOCUMENTED = {
    "query { gpuTypes { id displayName memoryInGb } }": {"data": {"gpuTypes": [
        {"id": "NVIDIA GeForce RTX 3070", "displayName": "RTX 3070", "memoryInGb": 8},
        {"id": "NVIDIA RTX A6000", "displayName": "RTX A6000", "memoryInGb": 48}]}},
    'query { gpuTypes(input: { id: "NVIDIA RTX A4000" }) { id displayName lowestPrice(input: { gpuCount: 1, '
    "secureCloud: true }) { stockStatus uninterruptablePrice availableGpuCounts } } }": {"data": {"gpuTypes": [
        {"id": "NVIDIA RTX A4000", "displayName": "RTX A4000",
         "lowestPrice": {"stockStatus": "High", "uninterruptablePrice": 0.35, "availableGpuCounts": [1, 2, 4]}}]}},
}
"""Queries and answers of RunPod's GraphQL docs (sdks/graphql/manage-pods.mdx)."""


@pytest.mark.parametrize("query", sorted(DOCUMENTED))
def test_the_documented_graphql_exchanges_fit_the_schema(query: str) -> None:
    assert graphql(query, DOCUMENTED[query]) == ""


def test_documented_gpu_types_read_with_prices_per_gpu_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU type as the docs and runpod-python show one: prices in dollars per GPU per
    hour, times the GPU count; memory in GB."""
    monkeypatch.setenv("RUNPOD_API_KEY", "k")
    api = runpod.RunPodAPI("community")
    gpu = {**GPU, "communityCloud": True, "communityPrice": 0.3, "communitySpotPrice": 0.15, "maxGpuCount": 2}
    assert graphql(answer={"data": {"gpuTypes": [gpu]}}) == ""
    monkeypatch.setattr(api._graphql, "call", lambda *a, **k: {"data": {"gpuTypes": [gpu]}})
    kinds = {k.name: k for k in api.machine_types(None)}
    assert sorted(kinds) == ["1x NVIDIA L4", "2x NVIDIA L4"]
    two = kinds["2x NVIDIA L4"]
    assert (two.price, two.spot_price, two.accelerator_memory_gb, two.vcpus, two.memory_gb) == (0.6, 0.3, 24, 8, 32)
