"""The fakes and clients of the clouds whose own API description is pinned
(tests/cloud/descriptions: GCP's discovery documents, Docker's Engine API v1.41,
DigitalOcean's API v2, Vultr's API v2, Lambda's Cloud API v1, Scaleway's Instance API v1)
are held to it: a request with a misspelt field, a value outside an enum, a missing required field,
an undescribed parameter or path, and an answer missing a required field or with a field
the description lacks each make a violation naming the operation and the field; the fake
records it without changing its answer; the real clients' usual calls (offers, firewalls,
create, read, list, delete) against the fakes make none; Docker's, Vultr's and Lambda's
documented example answers read as our clients read them."""

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
from cloud.fake_lambda import FakeLambda
from cloud.fake_scaleway import PROJECT as SCW_PROJECT
from cloud.fake_scaleway import FakeScaleway
from cloud.fake_vultr import FakeVultr

from skyward.providers.cloud import naming
from skyward.providers.cloud.api import Order
from skyward.providers.cloud.http import message
from skyward.providers.container import api as container
from skyward.providers.digitalocean.api import DigitalOceanAPI
from skyward.providers.gcp import api as compute
from skyward.providers.gcp.auth import token_for
from skyward.providers.lambda_cloud import api as lambda_cloud
from skyward.providers.scaleway import api as scaleway
from skyward.providers.vultr import api as vultr

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


# ---------------------------------------------------------------------------- Vultr: the check can fail

VULTR_ORDER = {"region": "ewr", "plan": "vc2-2c-4gb", "os_id": 2284, "label": "skyward-one", "sshkey_id": ["k"],
               "tags": ["skyward"], "firewall_group_id": "f", "user_data": "IyEvYmluL3NoCg==", "backups": "disabled"}


def vultr_instance(**changes: object) -> dict[str, object]:
    """An instance as the fake shows one, with ``changes``."""
    machine = FakeMachine("1001", "skyward-one", "vc2-2c-4gb", False, "Ubuntu 24.04 LTS x64", "", 0.03, region="ewr")
    return {**FakeVultr()._instance(machine), **changes}


def test_vultr_a_request_the_openapi_document_does_not_allow_is_named() -> None:
    v = load("vultr")
    made = {"instance": vultr_instance()}
    assert said(v, "POST", "/instances", body=VULTR_ORDER, status=202, answer=made) == ""
    misspelt = said(v, "POST", "/instances", body={**VULTR_ORDER, "sshkey_ids": ["k"]}, status=202, answer=made)
    assert "create-instance" in misspelt and "'sshkey_ids' was unexpected" in misspelt
    typed = said(v, "POST", "/instances", body={**VULTR_ORDER, "os_id": "2284"}, status=202, answer=made)
    assert "field 'os_id'" in typed and "'2284' is not of type 'integer'" in typed
    required = said(v, "POST", "/instances", body={"plan": "vc2-2c-4gb"}, status=202, answer=made)
    assert "'region' is a required property" in required
    rule = {"ip_type": "v4", "protocol": "tcp", "subnet": "0.0.0.0", "port": "22"}
    unsized = said(v, "POST", "/firewalls/f/rules", body=rule, status=400, answer={"error": "x", "status": 400})
    assert "post-firewalls-firewall-group-id-rules" in unsized and "'subnet_size' is a required property" in unsized
    query = said(v, "GET", "/instances", {"tag_name": "skyward"}, answer={"instances": []})
    assert "list-instances" in query and "query parameter 'tag_name' is not described" in query
    assert "'many' is not an integer" in said(v, "GET", "/plans", {"per_page": "many"}, answer={"plans": []})
    assert "no operation has this path" in said(v, "GET", "/instance/1001")


def test_vultr_an_answer_the_openapi_document_would_not_produce_is_named() -> None:
    v = load("vultr")
    plan = {"id": "vc2-1c-1gb", "vcpu_count": 1, "ram": 1024, "monthly_cost": 5, "locations": ["ewr"]}
    assert said(v, "GET", "/plans", answer={"plans": [plan, {**plan, "gpu_type": "NVIDIA_A100", "gpu_vram_gb": 80}]}) == ""
    hourly = said(v, "GET", "/plans", answer={"plans": [{**plan, "hourly_cost": 0.007}]})
    assert "list-plans" in hourly and "field 'plans[0]': Additional properties" in hourly and "'hourly_cost'" in hourly
    typed = said(v, "GET", "/instances/1001", answer={"instance": vultr_instance(ram="2048")})
    assert "get-instance" in typed and "field 'instance.ram'" in typed
    status = said(v, "POST", "/instances", body=VULTR_ORDER, status=201, answer={"instance": vultr_instance()})
    assert "answer status 201 is not described (only 202, 400, 401, 403, 404)" in status
    assert "answer status 405 is not described" in said(v, "PUT", "/instances/1001", body={}) + said(
        v, "GET", "/instances/1001", status=405, answer={"error": "x", "status": 405})
    assert said(v, "GET", "/instances/9", status=404, answer={"error": "Invalid instance-id.", "status": 404}) == ""


# ---------------------------------------------------------------------------- Lambda: the check can fail

LAUNCH = {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10", "ssh_key_names": ["k"], "name": "skyward-one",
          "user_data": "#!/bin/sh\n", "firewall_rulesets": [{"id": "r"}], "image": {"family": "lambda-stack-24-04"}}
LAMBDA_RULE = {"protocol": "tcp", "port_range": [22, 22], "source_network": "0.0.0.0/0", "description": "SSH"}


def lambda_instance(**changes: object) -> dict[str, object]:
    """An instance as the fake shows one, with ``changes`` (None: the field left out)."""
    machine = FakeMachine("1001", "skyward-one", "gpu_1x_a10", False, "lambda-stack-24-04", "", 0.75, region="us-east-1")
    shown = {**FakeLambda()._instance(machine), **changes}
    return {k: v for k, v in shown.items() if v is not None}


def test_lambda_a_request_the_openapi_document_does_not_allow_is_named() -> None:
    lam = load("lambda")
    launched = {"data": {"instance_ids": ["1001"]}}
    assert said(lam, "POST", "/instance-operations/launch", body=LAUNCH, answer=launched) == ""
    misspelt = said(lam, "POST", "/instance-operations/launch", body={**LAUNCH, "ssh_keys": ["k"]}, answer=launched)
    assert "launchInstance" in misspelt and "'ssh_keys' was unexpected" in misspelt
    image = said(lam, "POST", "/instance-operations/launch", body={**LAUNCH, "image": {"name": "x"}}, answer=launched)
    assert "field 'image'" in image
    protocol = said(lam, "POST", "/firewall-rulesets", body={"name": "g", "region": "us-east-1", "rules": [
        {**LAMBDA_RULE, "protocol": "TCP"}]}, status=400, answer={"error": {"code": "global/invalid-parameters",
                                                                           "message": "x"}})
    assert "createFirewallRuleset" in protocol and "field 'rules[0].protocol'" in protocol and "'TCP'" in protocol
    ports = said(lam, "POST", "/firewall-rulesets", body={"name": "g", "region": "us-east-1", "rules": [
        {**LAMBDA_RULE, "port_range": [0, 22]}]}, status=401, answer=None)
    assert "field 'rules[0].port_range[0]'" in ports
    required = said(lam, "POST", "/instance-operations/terminate", body={"ids": ["1001"]},
                    answer={"data": {"terminated_instances": []}})
    assert "terminateInstance" in required and "'instance_ids' is a required property" in required
    assert "query parameter 'region' is not described" in said(lam, "GET", "/instances", {"region": "x"},
                                                               answer={"data": []})


def test_lambda_an_answer_the_openapi_document_would_not_produce_is_named() -> None:
    lam = load("lambda")
    assert said(lam, "GET", "/instances/1001", answer={"data": lambda_instance()}) == ""
    missing = said(lam, "GET", "/instances/1001", answer={"data": lambda_instance(actions=None)})
    assert "getInstance" in missing and "field 'data': 'actions' is a required property" in missing
    status = said(lam, "GET", "/instances/1001", answer={"data": lambda_instance(status="running")})
    assert "field 'data.status'" in status and "'running' is not one of" in status
    extra = said(lam, "GET", "/instances", answer={"data": [lambda_instance(is_reserved=False)]})
    assert "listInstances" in extra and "'is_reserved' was unexpected" in extra
    cents = said(lam, "GET", "/instance-types", answer={"data": {"gpu_1x_a10": {
        "instance_type": {"name": "gpu_1x_a10", "description": "1x A10", "gpu_description": "A10 (24 GB PCIe)",
                          "price_cents_per_hour": 0.75, "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 1400,
                                                                  "gpus": 1}},
        "regions_with_capacity_available": [{"name": "us-east-1", "description": "Virginia, USA"}]}}})
    assert "listInstanceTypes" in cents and "field 'data.gpu_1x_a10.instance_type.price_cents_per_hour'" in cents
    capacity = {"code": "instance-operations/launch/insufficient-capacity", "message": "Not enough capacity."}
    assert said(lam, "POST", "/instance-operations/launch", body=LAUNCH, status=400, answer={"error": capacity}) == ""
    code = said(lam, "DELETE", "/ssh-keys/k", status=404, answer={"error": {
        "code": "global/object-does-not-exist", "message": "x"}})
    assert "deleteSSHKey" in code and "field 'error.code'" in code and "'global/not-found' was expected" in code
    unauthorized = said(lam, "GET", "/instances", status=401, answer={"message": "Unauthorized"})
    assert "'error' is a required property" in unauthorized


# ---------------------------------------------------------------------------- Scaleway: the check can fail

SCW = "/instance/v1/zones/fr-par-2"
SCW_ORDER = {"name": "skyward-one", "commercial_type": "DEV1-S", "image": "ubuntu_noble", "project": SCW_PROJECT,
             "tags": ["skyward"], "security_group": "g", "dynamic_ip_required": True, "enable_ipv6": False}


def scw_server(**changes: object) -> dict[str, object]:
    """A server as the fake shows one, with ``changes``."""
    machine = FakeMachine("1001", "skyward-one", "DEV1-S", False, "ubuntu_noble", "", 0.0088, region="fr-par-2")
    return {**FakeScaleway()._view(machine), **changes}


def test_scaleway_a_request_the_openapi_document_does_not_allow_is_named() -> None:
    scw = load("scaleway")
    made = {"server": scw_server()}
    assert said(scw, "POST", f"{SCW}/servers", body=SCW_ORDER, status=201, answer=made) == ""
    misspelt = said(scw, "POST", f"{SCW}/servers", body={**SCW_ORDER, "commercialType": "DEV1-S"}, status=201,
                    answer=made)
    assert "CreateServer" in misspelt and "'commercialType' was unexpected" in misspelt
    action = said(scw, "POST", f"{SCW}/servers/1001/action", body={"action": "power_on"}, answer={"task": {}})
    assert "ServerAction" in action and "field 'action'" in action and "'power_on' is not one of" in action
    rule = {"protocol": "tcp", "direction": "inbound", "action": "accept", "ip_range": "0.0.0.0/0"}
    lower = said(scw, "POST", f"{SCW}/security_groups/g/rules", body=rule, status=201, answer={"rule": {}})
    assert "CreateSecurityGroupRule" in lower and "field 'protocol'" in lower and "'tcp' is not one of" in lower
    zone = said(scw, "GET", "/instance/v1/zones/fr-par-9/servers", answer={"servers": []})
    assert "ListServers" in zone and "path parameter 'zone'" in zone and "'fr-par-9' is not one of" in zone
    assert "query parameter 'tag' is not described" in said(scw, "GET", f"{SCW}/servers", {"tag": "skyward"},
                                                            answer={"servers": []})
    assert said(scw, "PATCH", f"{SCW}/servers/1001/user_data/cloud-init", body="#!/bin/sh\n", status=204) == "", \
        "the user data is text (*/*)"


def test_scaleway_an_answer_the_openapi_document_would_not_produce_is_named() -> None:
    scw = load("scaleway")
    product = {"ncpus": 2, "ram": 2 * 2**30, "arch": "x86_64", "hourly_price": 0.0088, "gpu": 0}
    assert said(scw, "GET", f"{SCW}/products/servers", answer={"servers": {"DEV1-S": product}}) == ""
    bare = said(scw, "GET", f"{SCW}/products/servers", answer={"servers": {"DEV1-S": {**product, "baremetal": False}}})
    assert "ListServersTypes" in bare and "field 'servers.DEV1-S'" in bare and "'baremetal' was unexpected" in bare
    typed = said(scw, "GET", f"{SCW}/products/servers", answer={"servers": {"DEV1-S": {**product, "ram": "2G"}}})
    assert "field 'servers.DEV1-S.ram'" in typed, "a map's values are checked (<serverKey>)"
    state = said(scw, "GET", f"{SCW}/servers/1001", answer={"server": scw_server(state="booting")})
    assert "GetServer" in state and "field 'server.state'" in state and "'booting' is not one of" in state
    null = said(scw, "GET", f"{SCW}/servers/1001", answer={"server": scw_server(public_ip=None)})
    assert "field 'server.public_ip'" in null
    assert "answer status 200 is not described (only 201)" in said(scw, "POST", f"{SCW}/servers", body=SCW_ORDER,
                                                                    answer={"server": scw_server()})
    assert said(scw, "GET", f"{SCW}/servers/9", status=404, answer={"type": "not_found", "message": "x"}) == "", \
        "Scaleway's document describes no errors"


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


def usual_calls(api: Any, fake: Any, kind: Any, image: str, planted: str) -> None:
    """A key, a firewall and a machine made, read, listed beside a planted one and
    deleted through ``api``, the client's usual calls, checked as they go."""
    key = api.add_key(naming.key_name("0123456789abcdef"), PUBLIC_KEY)
    registered = api.keys()
    assert key is not None and [k.id for k in registered] == [key]
    group = naming.key_name("0123456789abcdef")
    firewall = api.add_firewall(group)
    assert [f.id for f in api.firewalls()] == [firewall]
    made = api.create(Order(naming.machine_name("0123456789abcdef", 0), kind, False, PUBLIC_KEY, key,
                            image, "#!/bin/sh\n", None, group))
    fake.started(made)
    machine = api.get(made)
    assert machine is not None and machine.state == "running"
    fake.plant(naming.machine_name("fedcba9876543210", 0), planted, tags=("skyward",))
    assert len(api.machines()) == 2
    api.delete(made)
    assert api.get(made) is None
    api.remove_firewall(firewall, group)
    api.remove_key(str(key))
    assert api.firewalls() == [] and api.keys() == []


def test_the_digitalocean_client_and_fake_agree_with_its_openapi_document(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    fake = FakeDigitalOcean()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = DigitalOceanAPI()
        kinds = {k.name: k for k in api.machine_types("nyc3")}
        usual_calls(api, fake, kinds["s-2vcpu-4gb"], "ubuntu-24-04-x64", "planted")
        assert fake.violations == []
    finally:
        fake.stop()


def test_the_vultr_client_and_fake_agree_with_its_openapi_document(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    fake = FakeVultr()
    fake.page_limit = 2  # every page read
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = vultr.VultrAPI()
        kinds = {k.name: k for k in api.machine_types("ewr")}
        assert kinds["vcg-a100-12c-120g-80vram"].accelerator_count == 1
        usual_calls(api, fake, kinds["vc2-2c-4gb"], "2284", "vc2-1c-1gb")
        assert fake.violations == []
    finally:
        fake.stop()


def test_the_lambda_client_and_fake_agree_with_its_openapi_document(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    fake = FakeLambda()
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = lambda_cloud.LambdaAPI()
        kinds = {k.name: k for k in api.machine_types("us-east-1")}
        group = naming.key_name("0123456789abcdef")
        key = api.add_key(group, PUBLIC_KEY)
        registered = api.keys()
        assert key is not None and [k.id for k in registered] == [key]
        assert api.add_firewall(group) == group
        order = Order(naming.machine_name("0123456789abcdef", 0), kinds["gpu_1x_a10"], False, PUBLIC_KEY, key,
                      "lambda-stack-24-04", "#!/bin/sh\n", None, group)
        made = api.create(order)
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running" and machine.hourly_price == 0.75
        assert [f.name for f in api.firewalls()] == [group]
        fake.plant(naming.machine_name("fedcba9876543210", 0), "gpu_1x_a100_sxm4")
        assert len(api.machines()) == 2
        api.delete(made)
        assert api.get(made) is None
        api.remove_firewall(group, group)
        api.remove_key(key)
        assert api.firewalls() == [] and api.keys() == []
        with pytest.raises(Exception, match="refused"):
            lambda_cloud.LambdaAPI(api_key="wrong").machines()
        fake.refuse("gpu_1x_a10")
        api.add_key(group, PUBLIC_KEY)
        with pytest.raises(Exception, match="no gpu_1x_a10"):
            api.create(order)
        assert fake.violations == []
    finally:
        fake.stop()


def test_the_scaleway_client_and_fake_agree_with_its_openapi_document(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    fake = FakeScaleway()
    fake.page_limit = 3  # every page read
    fake.serve_here(monkeypatch, tmp_path)
    try:
        api = scaleway.ScalewayAPI("fr-par-2")
        kinds = {k.name: k for k in api.machine_types("fr-par-2")}
        assert "H100-2-80G" not in kinds, "in shortage"
        group = naming.key_name("0123456789abcdef")
        firewall = api.add_firewall(group)
        assert [f.id for f in api.firewalls()] == [firewall]
        order = Order(naming.machine_name("0123456789abcdef", 0), kinds["L4-1-24G"], False, PUBLIC_KEY, None,
                      "ubuntu_noble_gpu_os_12", "#!/bin/sh\n", None, group)
        made = api.create(order)
        fake.started(made)
        machine = api.get(made)
        assert machine is not None and machine.state == "running"
        fake.plant(naming.machine_name("fedcba9876543210", 0), "DEV1-S", tags=("skyward",))
        assert len(api.machines()) == 2
        api.delete(made)
        assert api.get(made) is None
        fake.refuse("L4-1-24G")
        with pytest.raises(Exception, match="L4-1-24G"):
            api.create(order)
        api.remove_firewall(firewall, group)
        assert api.firewalls() == []
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


def vultr_example(path: str, method: str, status: str) -> Any:
    """The example answer Vultr's OpenAPI document gives ``method path`` with ``status``."""
    document = json.loads((DESCRIPTIONS / "vultr" / "api.v2.json").read_text())
    [found] = document["paths"][path][method]["responses"][status]["content"]["application/json"]["examples"].values()
    return found["value"]


def test_vultrs_documented_answers_read_as_our_client_reads_them() -> None:
    v = load("vultr")
    for path, method, status in (("/plans", "get", "200"), ("/instances", "post", "202"),
                                 ("/instances/{instance-id}", "get", "200")):
        assert said(v, method.upper(), path.replace("{instance-id}", "1001"), status=int(status),
                    answer=vultr_example(path, method, status), body=VULTR_ORDER if method == "post" else None) == ""
    [plan] = vultr_example("/plans", "get", "200")["plans"]
    assert (vultr._hourly(plan), vultr._gpu(plan)) == (192 / 730, None), "a monthly cost in dollars, no GPU"
    assert vultr._hourly({**plan, "hourly_cost": 0.3}) == 0.3, "an hourly cost read first, should Vultr send one"
    running = vultr._machine(vultr_example("/instances/{instance-id}", "get", "200")["instance"])
    assert (running.id, running.state, running.ssh_host, running.machine_type) == (
        "cb676a46-66fd-4dfb-b839-443f2e6c0b60", "running", "192.0.2.123", "vc2-6c-16gb")
    assert running.created == 1602294980, "date_created 2020-10-10T01:56:20+00:00"
    pending = vultr._machine(vultr_example("/instances", "post", "202")["instance"])
    assert (pending.state, pending.ssh_host) == ("starting", None), "main_ip 0.0.0.0 is no address yet"


def from_examples(schema: Any) -> Any:
    """A value built from the first of each property's documented ``examples`` (3.1)."""
    if "examples" in schema:
        return schema["examples"][0]
    properties = schema.get("properties", {})
    return {k: from_examples(v) for k, v in properties.items() if "examples" in v or "properties" in v}


def test_lambdas_documented_answers_read_as_our_client_reads_them() -> None:
    document = json.loads((DESCRIPTIONS / "lambda" / "cloud.v1.json").read_text())
    answer = document["paths"]["/api/v1/instances/{id}"]["get"]["responses"]["200"]["content"]["application/json"]
    instance = {**from_examples(answer["schema"]["properties"]["data"]), "status": "active"}
    assert instance["instance_type"]["price_cents_per_hour"] == 3592
    machine = lambda_cloud._machine(instance)
    assert (machine.id, machine.state, machine.ssh_host, machine.private_ip, machine.machine_type) == (
        "0920582c7ff041399e34823a0be62549", "running", "198.51.100.2", "10.0.2.100", "gpu_8x_h100_sxm5gdr")
    assert machine.hourly_price == 35.92, "a price in cents an hour, read as dollars"
    assert lambda_cloud._accelerator(instance["instance_type"]["gpu_description"]) == ("H100-SXM5", 80.0), \
        "H100 (80 GB SXM5): one GPU's memory in GB, the form read into the catalog's name"


def from_example(schema: Any) -> Any:
    """A value built from the ``example`` of each property the document gives one (a
    list: of its items'), the properties without one left out."""
    if "example" in schema:
        return schema["example"]
    if "items" in schema:
        item = from_example(schema["items"])
        return [item] if item else None
    shown = {k: from_example(v) for k, v in schema.get("properties", {}).items()}
    return {k: v for k, v in shown.items() if v}


def test_scaleways_documented_answers_read_as_our_client_reads_them() -> None:
    document = json.loads((DESCRIPTIONS / "scaleway" / "instance.v1.json").read_text())
    answer = document["paths"]["/instance/v1/zones/{zone}/servers/{server_id}"]["get"]["responses"]["200"]
    schema = answer["content"]["application/json"]["schema"]["properties"]["server"]
    server = {**from_example(schema), "id": "1001", "state": schema["properties"]["state"]["default"]}
    assert server["state"] == "running" and server["public_ips"][0]["address"] == "1.2.3.4"
    machine = scaleway._machine(server)
    assert (machine.state, machine.ssh_host) == ("running", "1.2.3.4"), "a routed IP (public_ips) is the address"
    assert machine.created == 1647952496.123456, "creation_date 2022-03-22T12:34:56.123456Z"
    assert scaleway._machine({**server, "public_ips": []}).ssh_host == "1.2.3.4", "else the deprecated public_ip"


def test_docs_providers_names_the_description_of_every_pinned_cloud() -> None:
    """docs/providers.md's table says, for each pinned description, what it is: a cloud
    pinned here and left out there (or still listed as not pinned) fails."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text()
    table = text.split("### How far each cloud is checked against its own API description", 1)[1].split("\n\n")[2]
    rows = {line.split("|")[1].strip(): line.split("|")[2] for line in table.splitlines()[2:]}
    shown = {"gcp": "GCP", "digitalocean": "DigitalOcean", "vultr": "Vultr", "lambda": "Lambda",
             "scaleway": "Scaleway", "docker": "`sky.Container` (Docker, Podman)", "hyperstack": "Hyperstack",
             "verda": "Verda", "runpod": "RunPod", "vastai": "Vast.ai", "massedcompute": "Massed Compute",
             "jarvislabs": "JarvisLabs", "novita": "Novita", "tensordock": "TensorDock"}
    pinned = sorted(path.name for path in DESCRIPTIONS.iterdir() if (path / "SOURCE.md").exists())
    assert sorted(shown) == pinned, "a description was pinned: name its cloud here and in docs/providers.md"
    for cloud in pinned:
        assert shown[cloud] in rows and "not pinned" not in rows[shown[cloud]], cloud
    assert not any(shown[cloud] in name for cloud in pinned for name in rows if "not pinned" in rows[name])
