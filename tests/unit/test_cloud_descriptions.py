"""The fakes and clients of the clouds whose own API description is pinned
(tests/cloud/descriptions: GCP's discovery documents, Docker's Engine API v1.41,
DigitalOcean's API v2) are held
to it: a request with a misspelt field, a value outside an enum, a missing required field,
an undescribed parameter or path, and an answer missing a required field or with a field
the description lacks each make a violation naming the operation and the field; the fake
records it without changing its answer; the real clients' usual calls (offers, firewalls,
create, read, list, delete) against the fakes make none; Docker's documented example
answers read as our client reads them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cloud.described import DESCRIPTIONS, PINNED, Description, load
from cloud.fake_cloud import FakeMachine
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.fake_docker import FakeDocker
from cloud.fake_gcp import PROJECT, ZONE, FakeGCP

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.cloud.http import message
from skyward.providers.container import api as container
from skyward.providers.digitalocean.api import DigitalOceanAPI
from skyward.providers.gcp import api as compute
from skyward.providers.gcp.auth import token_for

IN_ZONE = f"/projects/{PROJECT}/zones/{ZONE}"
INSERT = f"{IN_ZONE}/instances"
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedPlantedPlantedPlantedPlantedPlan test"
IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"


def instance(**changes: object) -> dict[str, object]:
    """An insert's body as Compute Engine takes it, with ``changes``."""
    body: dict[str, object] = {
        "name": "skyward-one", "machineType": f"zones/{ZONE}/machineTypes/e2-standard-2",
        "disks": [{"boot": True, "initializeParams": {"sourceImage": IMAGE}}],
        "networkInterfaces": [{"network": "global/networks/default", "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
        "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"},
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def said(description: Description, method: str, path: str, query: dict[str, str] | None = None,
         body: object = None, status: int = 200, answer: object = None) -> str:
    return "\n".join(description.violations(method, path, query or {}, body, status, answer))


# ---------------------------------------------------------------------------- the pins


@pytest.mark.parametrize("cloud", sorted(PINNED))
def test_each_pinned_description_says_where_it_came_from(cloud: str) -> None:
    source = (DESCRIPTIONS / cloud / "SOURCE.md").read_text()
    for needed in ("Repository", "Path", "Commit", "API version", "License", "Fetched"):
        assert needed in source, f"{cloud}/SOURCE.md names no {needed}"
    for extract in (DESCRIPTIONS / cloud).glob("*.json"):
        assert json.loads(extract.read_text())["x-skyward-source"], extract
    assert load(cloud).operations


# ---------------------------------------------------------------------------- GCP: the check can fail


def test_gcp_a_request_the_discovery_document_does_not_allow_is_named() -> None:
    gcp = load("gcp")
    assert said(gcp, "POST", INSERT, body=instance(), answer={"name": "operation-1", "status": "PENDING"}) == ""
    misspelt = said(gcp, "POST", INSERT, body=instance(machineTypee="e2-standard-2"))
    assert "compute.instances.insert" in misspelt and "'machineTypee' was unexpected" in misspelt
    deep = said(gcp, "POST", INSERT, body=instance(disks=[{"boot": True, "initializeParams": {"sourceImg": IMAGE}}]))
    assert "field 'disks[0].initializeParams'" in deep and "'sourceImg'" in deep
    enum = said(gcp, "POST", INSERT, body=instance(scheduling={"provisioningModel": "SPOTT"}))
    assert "field 'scheduling.provisioningModel'" in enum and "'SPOTT' is not one of" in enum
    required = said(gcp, "POST", INSERT, body=instance(name=None))
    assert "compute.instances.insert" in required and "'name' is a required property" in required
    typed = said(gcp, "POST", INSERT, body=instance(disks=[{"initializeParams": {"diskSizeGb": "fifty"}}]))
    assert "field 'disks[0].initializeParams.diskSizeGb'" in typed
    query = said(gcp, "GET", INSERT, {"maxResult": "500"}, status=200, answer={"items": []})
    assert "compute.instances.list" in query and "query parameter 'maxResult' is not described" in query
    assert "'many' is not an integer" in said(gcp, "GET", INSERT, {"maxResults": "many"}, answer={})
    assert said(gcp, "GET", INSERT, {"maxResults": "500", "pageToken": "7", "prettyPrint": "false"}, answer={}) == ""
    path = said(gcp, "GET", f"{IN_ZONE}/instances/Not_A_Name", answer={})
    assert "path parameter 'instance'" in path
    assert "is not described (only GET, POST there)" in said(gcp, "PUT", INSERT, body={})
    assert "no operation has this path" in said(gcp, "GET", f"{IN_ZONE}/instancez")
    assert "takes none" in said(gcp, "GET", f"{IN_ZONE}/machineTypes", body={"x": 1}, answer={})
    assert said(gcp, "POST", "/oauth2/token", body={"grant_type": "x"}) == "", "exempt: no discovery document"


def test_gcp_an_answer_the_discovery_document_would_not_produce_is_named() -> None:
    """Google's discovery documents mark no field of an answer required (only of a
    request), so an answer fails the check by a field they lack, a wrong type or value."""
    gcp = load("gcp")
    listed = {"kind": "compute#machineTypeList", "items": [{"name": "e2-standard-2", "guestCpus": 2, "memoryMb": 8192}]}
    assert said(gcp, "GET", f"{IN_ZONE}/machineTypes", answer=listed) == ""
    wrong = {"items": [{"name": "e2-standard-2", "guestCpus": "2", "memoryMB": 8192}]}
    problems = said(gcp, "GET", f"{IN_ZONE}/machineTypes", answer=wrong)
    assert "compute.machineTypes.list" in problems and "field 'items[0].guestCpus'" in problems
    assert "'memoryMB' was unexpected" in problems
    operation = said(gcp, "GET", f"{IN_ZONE}/operations/operation-1", answer={"name": "o", "status": "FINISHED"})
    assert "compute.zoneOperations.get" in operation and "field 'status'" in operation
    skus = said(gcp, "GET", "/v1/services/6F81-5844-456A/skus", {"pageSize": "5000"},
                answer={"skus": [{"pricingInfo": [{"pricingExpression": {"tieredRates": [
                    {"unitPrice": {"units": 1, "nanos": 5}}]}}]}]})
    assert "cloudbilling.services.skus.list" in skus and "field 'skus[0].pricingInfo[0]" in skus and "units" in skus
    assert said(gcp, "GET", INSERT, status=404, answer={"error": {"code": 404}}) == "", "errors are not described"


# ---------------------------------------------------------------------------- Docker: the check can fail

CREATE = "/containers/create"


def test_docker_a_request_the_engine_api_does_not_allow_is_named() -> None:
    docker = load("docker")
    created = {"Id": "abc", "Warnings": []}
    body = {"Image": "python:3.12-slim", "HostConfig": {"NetworkMode": "pool", "Init": True}}
    assert said(docker, "POST", CREATE, {"name": "one"}, body, 201, created) == ""
    misspelt = said(docker, "POST", CREATE, {"name": "one"}, {**body, "HostConfig": {"NetworkMod": "pool"}}, 201, created)
    assert "ContainerCreate" in misspelt and "field 'HostConfig'" in misspelt and "'NetworkMod'" in misspelt
    enum = said(docker, "POST", CREATE, {}, {**body, "HostConfig": {"RestartPolicy": {"Name": "sometimes"}}}, 201,
                created)
    assert "field 'HostConfig.RestartPolicy.Name'" in enum and "'sometimes' is not one of" in enum
    required = said(docker, "POST", "/networks/create", body={"Driver": "bridge"}, status=201, answer={"Id": "n1"})
    assert "NetworkCreate" in required and "'Name' is a required property" in required
    query = said(docker, "GET", "/containers/json", {"al": "true"}, answer=[])
    assert "ContainerList" in query and "query parameter 'al' is not described" in query
    assert "'yes' is not a boolean" in said(docker, "GET", "/containers/json", {"all": "yes"}, answer=[])
    assert said(docker, "GET", "/images/nvidia/cuda:12.8.0-runtime-ubuntu24.04/json", answer={"Id": "sha256:1"}) == ""
    assert "is not described" in said(docker, "GET", "/containers/abc/top")


def test_docker_an_answer_the_engine_api_would_not_produce_is_named() -> None:
    docker = load("docker")
    missing = said(docker, "POST", CREATE, {}, {"Image": "x"}, 201, {"Warnings": []})
    assert "ContainerCreate" in missing and "'Id' is a required property" in missing
    error = said(docker, "GET", "/containers/abc/json", status=404, answer={"error": "No such container"})
    assert "ContainerInspect" in error and "'message' is a required property" in error
    status = said(docker, "POST", "/networks/create", body={"Name": "n"}, status=200, answer={"Id": "n1"})
    assert "answer status 200 is not described (only 201" in status
    listed = said(docker, "GET", "/containers/json", answer=[{"Id": "a", "Ports": [{"PrivatePort": 22, "Type": "tcpp"}]}])
    assert "field '[0].Ports[0].Type'" in listed
    assert said(docker, "DELETE", "/containers/abc", {"force": "true"}, status=204) == ""


# ---------------------------------------------------------------------------- DigitalOcean: the check can fail

DROPLET = {"name": "skyward-one", "region": "nyc3", "size": "s-2vcpu-4gb", "image": "ubuntu-24-04-x64",
           "ssh_keys": ["1001"], "tags": ["skyward"], "user_data": "#!/bin/sh\n"}


def droplet(**changes: object) -> dict[str, object]:
    """A Droplet as the fake shows one, with ``changes`` (None: the field left out)."""
    shown = FakeDigitalOcean()._droplet(FakeMachine("1001", "skyward-one", "s-2vcpu-4gb", False, "ubuntu-24-04-x64", "",
                                                    0.03571, region="nyc3"))
    shown.update(changes)
    return {k: v for k, v in shown.items() if v is not None or k in ("kernel", "next_backup_window")}


def test_digitalocean_a_request_the_openapi_document_does_not_allow_is_named() -> None:
    do = load("digitalocean")
    assert said(do, "POST", "/v2/droplets", body=DROPLET, status=202, answer={"droplet": droplet(), "links": {}}) == ""
    misspelt = said(do, "POST", "/v2/droplets", body={**DROPLET, "user_dat": "x"}, status=202,
                    answer={"droplet": droplet(), "links": {}})
    assert "droplets_create" in misspelt and "'user_dat' was unexpected" in misspelt
    rules = [{"protocol": "tcpp", "ports": "22", "sources": {"addresses": ["0.0.0.0/0"]}}]
    enum = said(do, "POST", "/v2/firewalls", body={"name": "fw", "inbound_rules": rules}, status=400,
                answer={"id": "bad_request", "message": "x"})
    assert "firewalls_create" in enum and "field 'inbound_rules[0].protocol'" in enum and "'tcpp'" in enum
    required = said(do, "POST", "/v2/account/keys", body={"name": "k"}, status=401,
                    answer={"id": "unauthorized", "message": "x"})
    assert "sshKeys_create" in required and "'public_key' is a required property" in required
    query = said(do, "GET", "/v2/droplets", {"tag": "skyward"}, status=401, answer={"id": "unauthorized", "message": "x"})
    assert "droplets_list" in query and "query parameter 'tag' is not described" in query
    assert "outside [1, 200]" in said(do, "GET", "/v2/sizes", {"per_page": "500"}, status=401,
                                      answer={"id": "unauthorized", "message": "x"})


def test_digitalocean_an_answer_the_openapi_document_would_not_produce_is_named() -> None:
    do = load("digitalocean")
    assert "'meta' is a required property" in said(do, "GET", "/v2/sizes", answer={"sizes": []})
    missing = said(do, "GET", "/v2/droplets/1001", answer={"droplet": droplet(memory=None)})
    assert "droplets_get" in missing and "field 'droplet': 'memory' is a required property" in missing
    off = said(do, "GET", "/v2/droplets/1001", answer={"droplet": droplet(status="stopped")})
    assert "field 'droplet.status'" in off
    assert said(do, "GET", "/v2/droplets/1001", answer={"droplet": droplet(status="off")}) == "", "a word, not false"
    status = said(do, "POST", "/v2/droplets", body=DROPLET, status=200, answer={"droplet": droplet(), "links": {}})
    assert "answer status 200 is not described (it answers 202)" in status
    error = said(do, "GET", "/v2/droplets/9", status=404, answer={"message": "not found"})
    assert "'id' is a required property" in error


# ---------------------------------------------------------------------------- the fakes record, unchanged


@pytest.fixture
def gcp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGCP]:
    fake = FakeGCP()
    fake.use_subnet("192.0.2.0/24")
    fake.start()
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / "home"))
    for key, value in fake.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(compute, "OPERATION_POLL", 0.01)
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def docker() -> Iterator[FakeDocker]:
    fake = FakeDocker()
    fake.use_subnet("192.0.2.0/24")
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def test_a_fake_records_a_violation_and_answers_as_it_did_without_its_description(docker: FakeDocker) -> None:
    assert isinstance(docker.description, Description)
    asked = {"Image": "absent:1", "HostConfig": {"RestartPolicy": {"Name": "sometimes"}}}
    with httpx.Client(base_url=docker.url, transport=httpx.HTTPTransport(uds=docker.socket)) as http:
        checked = http.post(CREATE, json=asked)
        docker.description = None
        unchecked = http.post(CREATE, json=asked)
    assert (checked.status_code, checked.json()) == (unchecked.status_code, unchecked.json()) == (
        404, {"message": "No such image: absent:1"})
    assert len(docker.violations) == 1 and "'HostConfig.RestartPolicy.Name'" in docker.violations[0]
    assert docker.unreported() == docker.violations and docker.unreported() == []


# ---------------------------------------------------------------------------- the clients, held to them


def test_the_gcp_client_and_fake_agree_with_googles_discovery_documents(gcp: FakeGCP, tmp_path: Path) -> None:
    api = compute.GCPAPI(PROJECT, ZONE, "default", token_for(gcp.credentials_file(tmp_path)).headers)
    kinds = {k.name: k for k in api.machine_types(ZONE)}
    assert {"e2-standard-2", "g2-standard-4", "n1-standard-8+1xnvidia-tesla-t4"} <= set(kinds)
    group = naming.key_name("0123456789abcdef")
    api.add_firewall(group)
    assert [f.id for f in api.firewalls()] == [group]
    made = []
    for n, (kind, spot) in enumerate([("e2-standard-2", False), ("n1-standard-8+1xnvidia-tesla-t4", True)]):
        name = naming.machine_name("0123456789abcdef", n)
        made.append(api.create(Order(name, kinds[kind], spot, PUBLIC_KEY, None, IMAGE, "#!/bin/bash\nshutdown -h +30\n",
                                     None, group)))
    for machine_id in made:
        gcp.started(machine_id)
        machine = api.get(machine_id)
        assert machine is not None and machine.state == "running"
    assert sorted(m.id for m in api.machines()) == sorted(made)
    for machine_id in made:
        api.delete(machine_id)
        assert api.get(machine_id) is None
    api.remove_firewall(group, group)
    assert api.firewalls() == []
    gcp.refuse("e2-standard-2")
    with pytest.raises(Exception, match="no e2-standard-2"):
        api.create(Order(naming.machine_name("0123456789abcdef", 9), kinds["e2-standard-2"], False, PUBLIC_KEY, None,
                         IMAGE, "", None, group))
    assert {r.path for r in gcp.requests} >= {f"{IN_ZONE}/machineTypes", "/v1/services/6F81-5844-456A/skus"}
    assert gcp.violations == []


def test_the_docker_client_and_fake_agree_with_the_engine_api(docker: FakeDocker) -> None:
    api = container.ContainerAPI(docker.socket)
    [kind] = api.machine_types(None)
    group = naming.key_name("0123456789abcdef")
    network = api.add_firewall(group)
    assert [f.id for f in api.firewalls()] == [network]
    name = naming.machine_name("0123456789abcdef", 0)
    machine_id = api.create(Order(name, kind, False, PUBLIC_KEY, None, "python:3.12-slim", "sleep 1", None, group))
    docker.started(machine_id)
    deadline = time.monotonic() + 5
    while (found := api.get(machine_id)) is None or found.state != "running":
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    assert [m.id for m in api.machines()] == [machine_id]
    api.delete(machine_id)
    assert api.get(machine_id) is None
    docker.crash = "no sshd here"
    failed = api.create(Order(naming.machine_name("0123456789abcdef", 1), kind, False, PUBLIC_KEY, None,
                              "python:3.12-slim", "exit 1", None, group))
    with pytest.raises(container.ContainerFailed, match="no sshd here"):
        api.get(failed)
    api.delete(failed)
    api.remove_firewall(network, group)
    assert api.firewalls() == []
    assert docker.violations == []


def test_the_digitalocean_client_and_fake_agree_with_its_openapi_document(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    fake = FakeDigitalOcean()
    fake.use_subnet("192.0.2.0/24")
    fake.start()
    try:
        for key, value in {**fake.env(), "SKYWARD_HOME": str(tmp_path)}.items():
            monkeypatch.setenv(key, value)
        api = DigitalOceanAPI()
        kinds = {k.name: k for k in api.machine_types("nyc3")}
        key = api.add_key(naming.key_name("0123456789abcdef"), PUBLIC_KEY)
        registered = api.keys()
        assert [k.id for k in registered] == [key]
        group = naming.key_name("0123456789abcdef")
        firewall = api.add_firewall(group)
        assert [f.id for f in api.firewalls()] == [firewall]
        made = api.create(Order(naming.machine_name("0123456789abcdef", 0), kinds["s-2vcpu-4gb"], False, PUBLIC_KEY, key,
                                "ubuntu-24-04-x64", "#!/bin/sh\n", None, group))
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running"
        fake.plant(naming.machine_name("fedcba9876543210", 0), "planted", tags=("skyward",))
        assert len(api.machines()) == 2
        api.delete(made)
        assert api.get(made) is None
        api.remove_firewall(firewall, group)
        api.remove_key(str(key))
        assert api.firewalls() == [] and api.keys() == []
        assert fake.violations == []
    finally:
        fake.stop()


# ---------------------------------------------------------------------------- the documented examples


def example(path: str, method: str, status: str) -> Any:
    """The example answer the Engine API v1.41 documents for ``method path`` with ``status``."""
    document = json.loads((DESCRIPTIONS / "docker" / "engine.v1.41.json").read_text())
    return document["paths"][path][method]["responses"][status]["examples"]["application/json"]


def test_dockers_documented_answers_read_as_our_client_reads_them() -> None:
    listed = [container._listed(item) for item in example("/containers/json", "get", "200")]
    assert [(m.id, m.name, m.state, m.ssh_host, m.private_ip, m.created) for m in listed[:2]] == [
        ("8dfafdbc3a40", "boring_feynman", "stopped", None, "172.17.0.2", 1367854155),  # its port 2222 is not sshd's
        ("9cd87474be90", "coolName", "stopped", None, "172.17.0.8", 1367854155),
    ], "the documented State 'Exited' is a stopped container"
    inspected = container._inspected(example("/containers/{id}/json", "get", "200"))
    assert (inspected.name, inspected.state, inspected.private_ip) == ("boring_euclid", "starting", "172.17.0.2"), \
        "running, but no port 22 is published: not reachable yet"
    assert inspected.created == pytest.approx(1420559251.485331)
    made = example("/containers/create", "post", "201")
    assert made == {"Id": "e90e34656806", "Warnings": []}
    for path, method in (("/containers/{id}/json", "get"), ("/containers/{id}", "delete")):
        assert message(example(path, method, "404")) == "No such container: c2ada9df5af8"
