"""The clouds' fakes (tests/cloud/fake_*.py) refuse what the real APIs would, so a client
that sends it fails against them too: a path none of a fake's operations has, a method the
path does not take, a query parameter or a body field (at any depth) the operation does
not declare, each refused in the cloud's own error shape naming the operation and the
field; a listing filtered by tag holds only the machines that carry the tag; RunPod's
GraphQL answers each query as a GraphQL server does, refusing one RunPod's schema does not
allow; Hyperstack refuses a security rule it does not document."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from cloud.fake_cloud import TOKEN, FakeCloud, Operation, keyed, shape
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.fake_docker import FakeDocker
from cloud.fake_gcp import FakeGCP
from cloud.fake_hyperstack import FakeHyperstack
from cloud.fake_jarvislabs import FakeJarvisLabs
from cloud.fake_lambda import FakeLambda
from cloud.fake_massedcompute import FakeMassedCompute
from cloud.fake_novita import FakeNovita
from cloud.fake_runpod import FakeRunPod
from cloud.fake_scaleway import FakeScaleway
from cloud.fake_tensordock import FakeTensorDock
from cloud.fake_vastai import FakeVastAI
from cloud.fake_verda import FakeVerda
from cloud.fake_vultr import FakeVultr

from skyward.providers.hyperstack.api import security_rules

FAKES: list[Callable[[], FakeCloud]] = [
    FakeDigitalOcean, FakeDocker, FakeGCP, FakeHyperstack, FakeJarvisLabs, FakeLambda, FakeMassedCompute, FakeNovita,
    FakeRunPod, FakeScaleway, FakeTensorDock, FakeVastAI, FakeVerda, FakeVultr,
]
UNKNOWN = "zz_not_documented"


def client(fake: FakeCloud) -> httpx.Client:
    """An HTTP client of the fake's API (below its prefix), with the credentials it takes."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if isinstance(fake, FakeScaleway):
        headers = {"X-Auth-Token": TOKEN}
    elif isinstance(fake, FakeHyperstack):
        headers = {"api_key": TOKEN}
    elif isinstance(fake, FakeGCP):
        fake.tokens["ya29.test"] = time.time() + 600
        headers = {"Authorization": "Bearer ya29.test"}
    if isinstance(fake, FakeDocker):
        return httpx.Client(base_url=fake.url, transport=httpx.HTTPTransport(uds=fake.socket))
    return httpx.Client(base_url=fake.url, headers=headers)


@pytest.fixture(params=FAKES, ids=lambda make: make.__name__)
def fake(request: pytest.FixtureRequest) -> Iterator[FakeCloud]:
    running = request.param()
    running.use_subnet("192.0.2.0/24")
    running.start()
    try:
        yield running
    finally:
        running.stop()


def concrete(operation: Operation) -> str:
    """The operation's path with each placeholder filled in."""
    return "/".join("a/b" if part.endswith("+}") else "p1" if part.startswith("{") else part
                    for part in operation.path.split("/"))


def said(answer: httpx.Response) -> str:
    return json.dumps(answer.json())


# ---------------------------------------------------------------------------- every fake


def test_a_body_field_no_operation_declares_is_refused_naming_it(fake: FakeCloud) -> None:
    with client(fake) as http:
        for operation in (op for op in fake.operations if op.body is not None):
            answer = http.request(operation.method, concrete(operation), json={UNKNOWN: 1})
            assert answer.status_code == fake.invalid_status, f"{operation}: {answer.status_code} {answer.text}"
            assert UNKNOWN in said(answer) and operation.path in said(answer), answer.text
    assert fake.machines == {} and fake.keys == {} and fake.firewalls == {}, "a refused request changed nothing"


def test_a_query_parameter_no_operation_declares_is_refused_naming_it(fake: FakeCloud) -> None:
    with client(fake) as http:
        for operation in fake.operations:
            body: dict[str, Any] | None = {} if operation.body is not None else None
            answer = http.request(operation.method, concrete(operation), params={UNKNOWN: "1"}, json=body)
            assert answer.status_code == fake.invalid_status, f"{operation}: {answer.status_code} {answer.text}"
            assert UNKNOWN in said(answer) and operation.path in said(answer), answer.text


def test_an_undeclared_path_or_method_is_refused_in_the_clouds_shape(fake: FakeCloud) -> None:
    listed = next(op for op in fake.operations if op.method == "GET")
    with client(fake) as http:
        nowhere = http.get("/zz-nowhere")
        assert nowhere.status_code == 404 and "zz-nowhere" in said(nowhere)
        unsupported = http.request("PATCH", concrete(listed))
        assert unsupported.status_code in (404, 405) and "PATCH" in said(unsupported)
    assert nowhere.json().keys() == fake.error(404, "").body.keys(), "the cloud's own error shape"


def test_a_body_that_an_operation_does_not_take_is_refused(fake: FakeCloud) -> None:
    without = next(op for op in fake.operations if op.method == "GET" and op.body is None)
    with client(fake) as http:
        answer = http.request("GET", concrete(without), json={"x": 1})
    assert answer.status_code == fake.invalid_status and "takes no body" in said(answer)


# ---------------------------------------------------------------------------- the check itself


def test_a_shape_names_the_first_undeclared_field_by_its_path() -> None:
    rule = shape("protocol", "ports", sources=shape("addresses", "tags"))
    body = shape("name", inbound_rules=rule, gpus=keyed(shape("count")))
    assert body.unknown({"name": "x", "inbound_rules": [{"protocol": "tcp", "sources": {"tags": ["a"]}}]}) is None
    assert body.unknown({"inbound_rules": [{"protocol": "tcp"}, {"sources": {"droplets": [1]}}]}) == \
        "inbound_rules[1].sources.droplets"
    assert body.unknown({"gpus": {"any-name": {"count": 1}}}) is None
    assert body.unknown({"gpus": {"any-name": {"count": 1, "memory": 2}}}) == "gpus.any-name.memory"
    assert body.unknown("a text body") is None


def test_an_operation_matches_its_path_pattern_only() -> None:
    one = Operation("GET", "/instances/{id}/")
    many = Operation("GET", "/images/{name+}/json")
    assert one.matches("/instances/17/") and not one.matches("/instances/17") and not one.matches("/instances/1/2/")
    assert many.matches("/images/nvidia/cuda:12.8.0-runtime-ubuntu24.04/json") and not many.matches("/images/json")


# ---------------------------------------------------------------------------- tags

TAGGED_LISTINGS: list[tuple[Callable[[], FakeCloud], str, dict[str, str], Callable[[Any], list[str]]]] = [
    (FakeVultr, "/instances", {"tag": "skyward"}, lambda a: [i["id"] for i in a["instances"]]),
    (FakeDigitalOcean, "/v2/droplets", {"tag_name": "skyward"}, lambda a: [str(d["id"]) for d in a["droplets"]]),
    (FakeScaleway, "/instance/v1/zones/fr-par-1/servers", {"tags": "skyward"},
     lambda a: [s["id"] for s in a["servers"]]),
    (FakeDocker, "/containers/json", {"all": "true", "filters": json.dumps({"label": ["skyward.pool"]})},
     lambda a: [c["Id"] for c in a]),
]


@pytest.mark.parametrize(("make", "path", "query", "ids"), TAGGED_LISTINGS, ids=["vultr", "digitalocean", "scaleway",
                                                                              "docker"])
def test_a_listing_by_tag_holds_only_the_machines_that_carry_it(
    make: Callable[[], FakeCloud], path: str, query: dict[str, str], ids: Callable[[Any], list[str]],
) -> None:
    running = make().start()
    try:
        tagged = running.plant("skyward-aaaaaaaaaaaa-000000-0", "planted", tags=("skyward",))
        other = running.plant("skyward-bbbbbbbbbbbb-000000-0", "planted", tags=("someone-else",))
        untagged = running.plant("skyward-cccccccccccc-000000-0", "planted")
        for machine in (other, untagged):
            machine.extra.pop("labels", None)  # Docker's tags are labels
        with client(running) as http:
            answer = http.get(path, params=query)
        assert answer.status_code == 200, answer.text
        assert ids(answer.json()) == [tagged.id]
    finally:
        running.stop()


def test_a_docker_filter_the_fake_does_not_implement_is_refused() -> None:
    running = FakeDocker().start()
    try:
        with client(running) as http:
            answer = http.get("/containers/json", params={"filters": json.dumps({"name": ["x"]})})
        assert answer.status_code == 400 and "'name'" in answer.json()["message"]
    finally:
        running.stop()


# ---------------------------------------------------------------------------- RunPod's GraphQL


@pytest.fixture
def runpod() -> Iterator[tuple[FakeRunPod, httpx.Client]]:
    running = FakeRunPod()
    running.use_subnet("192.0.2.0/24")
    running.start()
    try:
        with httpx.Client(base_url=running.url.removesuffix(running.prefix),
                          headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            yield running, http
    finally:
        running.stop()


@pytest.mark.parametrize(("query", "error"), [
    ("query { gpuTypes { id ", "Syntax Error"),
    ("query { gpuTypes { id priceOfTea } }", "priceOfTea"),
    ("query { gpuTypes(input: {name: \"L4\"}) { id } }", "name"),
    ("query { gpuTypes { lowestPrice(input: {gpus: 1}) { minVcpu } } }", "gpus"),
    ("query { pods { id } }", "pods"),
    ("mutation { podTerminate(input: {id: \"1\"}) }", "id"),
    ("mutation { podLaunch(input: {name: \"x\"}) { id } }", "podLaunch"),
])
def test_runpod_refuses_a_query_its_schema_does_not_allow(runpod: tuple[FakeRunPod, httpx.Client], query: str,
                                                          error: str) -> None:
    _, http = runpod
    answer = http.post("/graphql", json={"query": query})
    assert answer.status_code == 400, answer.text
    errors = answer.json()["errors"]
    assert errors and error in errors[0]["message"], errors
    assert "data" not in answer.json()


def test_runpod_answers_each_query_with_what_it_asks(runpod: tuple[FakeRunPod, httpx.Client]) -> None:
    fake, http = runpod
    one = http.post("/graphql", json={
        "query": "query One($id: String) { gpuTypes(input: {id: $id}) { id lowestPrice(input: {gpuCount: 2}) "
                 "{ minVcpu } } }", "variables": {"id": "NVIDIA L4"}})
    assert one.json() == {"data": {"gpuTypes": [{"id": "NVIDIA L4", "lowestPrice": {"minVcpu": 8}}]}}
    every = http.post("/graphql", json={"query": "{ gpuTypes { displayName } }"}).json()
    assert every == {"data": {"gpuTypes": [{"displayName": "L4"}, {"displayName": "A100 PCIe"}]}}

    deployed = http.post("/graphql", json={"query": """mutation { podFindAndDeployOnDemand(input: {name: "p",
        imageName: "img", gpuTypeId: "NVIDIA L4", gpuCount: 1, ports: "22/tcp",
        env: [{key: "PUBLIC_KEY", value: "ssh-ed25519 AAA"}]}) { id podType costPerHr } }"""}).json()
    pod = deployed["data"]["podFindAndDeployOnDemand"]
    assert pod["podType"] == "RESERVED" and pod["costPerHr"] == 0.43
    assert fake.machines[pod["id"]].public_key == "ssh-ed25519 AAA"
    mine = http.post("/graphql", json={"query": "{ myself { pods { id name } } }"}).json()
    assert mine == {"data": {"myself": {"pods": [{"id": pod["id"], "name": "p"}]}}}

    refused = http.post("/graphql", json={"query": """mutation { podRentInterruptable(input: {name: "q",
        imageName: "img", gpuTypeId: "NVIDIA H9000", gpuCount: 1, ports: "22/tcp", bidPerGpu: 0.1}) { id } }"""})
    assert refused.status_code == 200 and refused.json()["data"] == {"podRentInterruptable": None}
    assert "NVIDIA H9000" in refused.json()["errors"][0]["message"]

    ended = http.post("/graphql", json={"query": f'mutation {{ podTerminate(input: {{podId: "{pod["id"]}"}}) }}'})
    assert ended.json() == {"data": {"podTerminate": None}} and fake.live() == []


# ---------------------------------------------------------------------------- Hyperstack's security rules

SSH = {"direction": "ingress", "protocol": "tcp", "ethertype": "IPv4", "remote_ip_prefix": "0.0.0.0/0",
       "port_range_min": 22, "port_range_max": 22}


@pytest.fixture
def hyperstack() -> Iterator[tuple[FakeHyperstack, Callable[[list[dict[str, Any]]], httpx.Response]]]:
    """The fake with an environment and its keypair, and a function that asks it for a VM
    with the security rules given."""
    running = FakeHyperstack()
    running.use_subnet("192.0.2.0/24")
    running.start()
    http = client(running)
    http.post("/core/environments", json={"name": "env", "region": "CANADA-1"}).raise_for_status()
    http.post("/core/keypairs", json={"name": "key", "environment_name": "env", "public_key": "ssh-ed25519 AAA"})

    def create(rules: list[dict[str, Any]]) -> httpx.Response:
        return http.post("/core/virtual-machines", json={
            "name": "vm", "environment_name": "env", "key_name": "key", "image_name": "Ubuntu Server 22.04 LTS",
            "flavor_name": "n3-RTX-A6000x1", "count": 1, "security_rules": rules,
        })

    try:
        yield running, create
    finally:
        http.close()
        running.stop()


@pytest.mark.parametrize(("rule", "named"), [
    ({**SSH, "direction": "inbound"}, "direction"),
    ({**SSH, "ethertype": "IPv5"}, "ethertype"),
    ({**SSH, "protocol": "tcpp"}, "protocol"),
    ({**SSH, "remote_ip_prefix": "10.0.0.0/33"}, "remote_ip_prefix"),
    ({**SSH, "ethertype": "IPv6"}, "remote_ip_prefix"),
    ({**SSH, "protocol": "any"}, "port_range"),
    ({**SSH, "port_range_min": 23}, "port_range"),
    ({**SSH, "port_range_max": 70000}, "port_range"),
    ({k: v for k, v in SSH.items() if k != "direction"}, "direction"),
    ({**SSH, "port": 22}, "security_rules[1].port"),
])
def test_hyperstack_refuses_a_security_rule_it_does_not_document(
    hyperstack: tuple[FakeHyperstack, Callable[[list[dict[str, Any]]], httpx.Response]], rule: dict[str, Any],
    named: str,
) -> None:
    fake, create = hyperstack
    answer = create([SSH, rule])
    assert answer.status_code == 400 and named in answer.json()["message"], answer.text
    assert fake.live() == []


def test_hyperstack_takes_the_rules_the_client_sends(
    hyperstack: tuple[FakeHyperstack, Callable[[list[dict[str, Any]]], httpx.Response]],
) -> None:
    fake, create = hyperstack
    answer = create(security_rules())
    assert answer.status_code == 200, answer.text
    assert [m.extra["rules"] for m in fake.live()] == [security_rules()]
