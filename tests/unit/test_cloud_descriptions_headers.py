"""The headers that carry meaning and the ``format``s of values, held to each pinned
description (tests/cloud/described.py): the key a request carries against the security
schemes the description declares for its operation (Bearer, Basic, a named header, or a
discovery document's OAuth 2.0), the ``Content-Type`` of its body against the media types
the operation takes, header parameters, and every string or integer ``format`` (RFC 3339
times, sized integers, uuids, base64, addresses) in requests and answers. Each check can
fail, and each fake asks for a key exactly where its cloud's description does."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from cloud.described import FORMATS, PINNED, load
from cloud.fake_cloud import TOKEN, FakeCloud
from cloud.fake_digitalocean import FakeDigitalOcean
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

BEARER = {"Authorization": "Bearer planted-key"}
JSON = {"Content-Type": "application/json"}
KEYED: tuple[type[FakeCloud], ...] = (
    FakeDigitalOcean, FakeHyperstack, FakeJarvisLabs, FakeLambda, FakeMassedCompute, FakeNovita, FakeRunPod,
    FakeScaleway, FakeTensorDock, FakeVastAI, FakeVerda, FakeVultr,
)
"""The fakes of the clouds that take a key (Docker's engine takes none; GCP's fake is checked below)."""
TOKEN_PATHS = {("POST", "/oauth2/token")}
"""Where a client gets its token, taking the client's credentials instead of a key."""


def said(cloud: str, method: str, path: str, headers: dict[str, str], query: dict[str, str] | None = None,
         body: object = None, status: int = 200, answer: object = None) -> str:
    return "\n".join(load(cloud).violations(method, path, query or {}, body, status, answer, headers))


@pytest.mark.parametrize("fake", KEYED, ids=lambda fake: fake.pinned)
def test_each_fake_asks_for_a_key_exactly_where_its_description_does(fake: type[FakeCloud]) -> None:
    described = load(fake.pinned)
    keyless = {(op.method, op.path) for op in described.operations if not op.security}
    assert keyless - TOKEN_PATHS == set(fake.public), (
        f"{fake.pinned}: the description takes {sorted(keyless)} without a key, the fake {sorted(fake.public)}")
    assert all(op.security for op in described.operations if (op.method, op.path) not in keyless)


def test_every_pinned_description_that_takes_a_key_says_how() -> None:
    for cloud in sorted(set(PINNED) - {"docker"}):
        assert any(op.security for op in load(cloud).operations), f"{cloud} describes no key"
    assert not any(op.security for op in load("docker").operations), "the engine's socket takes no key"


def test_a_request_without_the_described_key_is_named() -> None:
    assert said("digitalocean", "GET", "/v2/droplets/1", BEARER, status=404,
                answer={"id": "not_found", "message": "x"}) == ""
    none = said("digitalocean", "GET", "/v2/droplets/1", {}, status=404, answer={"id": "not_found", "message": "x"})
    assert "droplets_get" in none and "carries none of the credentials described" in none
    assert "header 'Authorization' as 'Bearer <key>'" in none
    scheme = said("digitalocean", "GET", "/v2/droplets/1", {"Authorization": "Token planted-key"}, status=404,
                  answer={"id": "not_found", "message": "x"})
    assert "carries none of the credentials" in scheme, "a key under another scheme is no Bearer token"


def test_a_key_in_the_wrong_header_is_named() -> None:
    servers = "/instance/v1/zones/fr-par-2/servers/x"
    assert said("scaleway", "DELETE", servers, {"X-Auth-Token": "k"}, status=204) == ""
    wrong = said("scaleway", "DELETE", servers, BEARER, status=204)
    assert "header 'X-Auth-Token'" in wrong, "Scaleway's scheme is its own header"
    assert said("hyperstack", "DELETE", "/core/virtual-machines/7", {"api_key": "k"},
                answer={"status": True, "message": "x"}) == ""
    assert "header 'api_key'" in said("hyperstack", "DELETE", "/core/virtual-machines/7", BEARER,
                                      answer={"status": True, "message": "x"})


def test_any_one_alternative_of_a_requirement_will_do() -> None:
    keys = {"data": []}
    assert said("lambda", "GET", "/ssh-keys", BEARER, answer=keys) == ""
    assert said("lambda", "GET", "/ssh-keys", {"Authorization": "Basic cGxhbnRlZDo="}, answer=keys) == ""
    assert "'Basic <key>'" in said("lambda", "GET", "/ssh-keys", {}, answer=keys)


def test_a_keyless_operation_and_a_discovery_documents_oauth() -> None:
    assert said("vultr", "GET", "/regions", {}, answer={"regions": [], "meta": {"total": 0, "links": {}}}) == ""
    zone = "/projects/p/zones/us-central1-a/instances/x"
    assert said("gcp", "DELETE", zone, {"authorization": "Bearer t"}, answer={"kind": "compute#operation"}) == ""
    assert "Bearer" in said("gcp", "DELETE", zone, {}, answer={"kind": "compute#operation"})


def test_a_graphql_endpoint_takes_the_key_as_runpods_client_sends_it() -> None:
    query = {"query": "query { myself { id } }"}
    assert said("runpod", "POST", "/graphql", BEARER, body=query, answer={"data": {"myself": {"id": "u"}}}) == ""
    assert "carries none" in said("runpod", "POST", "/graphql", {}, body=query, answer={"data": {"myself": {"id": "u"}}})


def test_a_body_sent_as_another_media_type_is_named() -> None:
    key = {"name": "k", "public_key": "ssh-ed25519 AAAA k"}
    answer = {"ssh_key": {"id": 1, "fingerprint": "f", "public_key": key["public_key"], "name": "k"}}
    assert said("digitalocean", "POST", "/v2/account/keys", {**BEARER, **JSON}, body=key, status=201,
                 answer=answer) == ""
    charset = said("digitalocean", "POST", "/v2/account/keys", {**BEARER, "content-type": "application/json; charset=utf-8"},
                   body=key, status=201, answer=answer)
    assert charset == "", "parameters of the media type are no part of it"
    form = said("digitalocean", "POST", "/v2/account/keys", {**BEARER, "Content-Type": "application/x-www-form-urlencoded"},
                body=key, status=201, answer=answer)
    assert "sshKeys_create" in form and "sent as 'application/x-www-form-urlencoded'" in form
    assert form.endswith("the operation takes application/json")
    assert "no Content-Type" in said("digitalocean", "POST", "/v2/account/keys", BEARER, body=key, status=201,
                                     answer=answer)


def test_a_header_parameter_is_held_to_its_schema() -> None:
    """Docker's ``X-Registry-Auth`` (a pull's registry credentials): the one header parameter of the operations skyward calls."""
    operation = next(op for op in load("docker").operations if op.id == "ImageCreate")
    assert operation.parameters["X-Registry-Auth"].where == "header"
    ok = load("docker").violations("POST", "/images/create", {"fromImage": "ubuntu"}, None, 200, None,
                                   {"X-Registry-Auth": "e30="})
    assert ok == []


@pytest.mark.parametrize(("form", "good", "bad"), [
    ("date-time", "2024-05-01T12:00:00.5+02:00", "2024-05-01 12:00"),
    ("date-time", "2024-05-01T12:00:00Z", "2024-05-01T12:00:00"),
    ("date-time", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z"),
    ("google-datetime", "2024-05-01T12:00:00.123-07:00", "yesterday"),
    ("int32", 2**31 - 1, 2**31),
    ("uint64", "18446744073709551615", "18446744073709551616"),
    ("uint32", 0, -1),
    ("uuid", "8b52a46b-a892-4fde-925c-6d13226908f7", "8b52a46b-uuid-4fde-xxxx-6d13226908f7"),
    ("byte", "c2t5d2FyZA==", "not base64!"),
    ("ipv4", "192.0.2.7", "192.0.2.300"),
    ("ip-address", "2001:db8::1", "host"),
    ("CIDR", "10.0.0.0/8", "10.0.0.0/33"),
    ("uri", "https://example.com/x", "not a uri"),
])
def test_each_format_holds_what_it_says(form: str, good: Any, bad: Any) -> None:
    assert FORMATS.conforms(good, form)
    assert not FORMATS.conforms(bad, form)
    assert FORMATS.conforms(True, "int32") and FORMATS.conforms(1.5, "float"), "only what a format is about"


def test_a_value_of_the_wrong_format_is_named_in_an_answer_and_a_path() -> None:
    flavor = {"id": 1, "name": "n3-A100x1", "region_name": "CANADA-1", "cpu": 28, "ram": 120.0, "disk": 100,
              "ephemeral": 0, "gpu": "A100-80G-PCIe", "gpu_count": 1, "stock_available": True,
              "created_at": "2024-01-01T00:00:00", "labels": [], "features": {}}
    answer = {"status": True, "message": "x", "data": [{"gpu": "A100-80G-PCIe", "region_name": "CANADA-1",
                                                        "flavors": [flavor]}]}
    naive = said("hyperstack", "GET", "/core/flavors", {"api_key": "k"}, answer=answer)
    assert "field 'data[0].flavors[0].created_at': '2024-01-01T00:00:00' is not a 'date-time'" in naive
    flavor["created_at"] = "2024-01-01T00:00:00.000+00:00"
    assert said("hyperstack", "GET", "/core/flavors", {"api_key": "k"}, answer=answer) == ""


def test_the_fakes_check_what_the_client_really_sent() -> None:
    fake = FakeDigitalOcean()
    fake.use_subnet("192.0.2.0/24")
    fake.start()
    try:
        with httpx.Client(base_url=fake.url) as http:
            assert http.get("/v2/droplets", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert fake.unreported() == []
            assert http.post("/v2/account/keys", content=b'{"name": "k", "public_key": "ssh-ed25519 AAAA k"}',
                             headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"}).status_code
            assert any("sent as 'text/plain'" in text for text in fake.unreported())
            assert http.get("/v2/droplets").status_code == 401
            assert any("carries none of the credentials" in text for text in fake.unreported())
    finally:
        fake.stop()
