"""The shared cloud pieces without a cloud: the HTTP client (timeouts, bounded retries,
errors naming cloud, call and status, secrets never shown), credentials, names for gc,
offers from machine types, and container images."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import skyward as sky
from skyward.providers.cloud import credentials, http, naming
from skyward.providers.cloud import offers as pricing
from skyward.providers.cloud.api import MachineType
from skyward.providers.cloud.errors import CloudAPIError, CloudError, CredentialsError

SECRET = "sk-very-secret"


class Script:
    """A local server answering each request with the next (status, body) of ``answers``."""

    def __init__(self, answers: list[tuple[int, Any]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str, str]] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                script.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
                status, body = script.answers.pop(0) if script.answers else (500, {"message": "no more answers"})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "BACKOFF", 0.01)


def client(url: str) -> http.ApiClient:
    return http.ApiClient("Acme", url, lambda: {"Authorization": f"Bearer {SECRET}"}, "$ACME_KEY")


def test_a_read_is_retried_on_5xx_and_429_then_answers(fast: None) -> None:
    script = Script([(503, {"message": "busy"}), (429, {}), (200, {"ok": 1})])
    assert client(script.url).call("GET", "/things", "listing things") == {"ok": 1}
    assert len(script.seen) == 3 and script.seen[0][2] == f"Bearer {SECRET}"


def test_a_create_is_not_repeated_after_the_server_saw_it(fast: None) -> None:
    script = Script([(500, {"error": "internal"}), (200, {"id": "dup"})])
    with pytest.raises(CloudAPIError, match=r"the Acme API answered HTTP 500 while creating a thing: internal") as failed:
        client(script.url).call("POST", "/things", "creating a thing", json={"a": 1})
    assert failed.value.status == 500 and len(script.seen) == 1


def test_refused_credentials_name_where_they_come_from_never_the_value(fast: None) -> None:
    script = Script([(401, {"message": "Unauthorized"})])
    with pytest.raises(CredentialsError) as refused:
        client(script.url).call("GET", "/things", "listing things")
    assert "$ACME_KEY" in str(refused.value) and SECRET not in str(refused.value)


def test_an_unreachable_api_is_a_clear_error_after_bounded_retries(fast: None) -> None:
    with pytest.raises(CloudError, match=r"could not reach the Acme API .* while listing things"):
        client("http://127.0.0.1:9").call("GET", "/things", "listing things")


def test_messages_come_from_the_api_s_own_keys() -> None:
    assert http.message({"error": {"message": "no GPUs"}}) == "no GPUs"
    assert http.message({"errors": [{"detail": "bad"}, "worse"]}) == "bad; worse"
    assert http.message(None) == "no message"


def test_credentials_come_from_env_then_the_tool_s_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = credentials.Source(("ACME_KEY",), str(tmp_path / "config.toml"), "apikey")
    monkeypatch.delenv("ACME_KEY", raising=False)
    with pytest.raises(CredentialsError, match=r"Acme credentials were not found: set \$ACME_KEY \(or .*config.toml\)"):
        credentials.require("Acme", [source])
    (tmp_path / "config.toml").write_text('apikey = "from-file"\n')
    assert credentials.require("Acme", [source]) == ("from-file",)
    monkeypatch.setenv("ACME_KEY", "from-env")
    assert credentials.require("Acme", [source]) == ("from-env",)
    yaml = credentials.Source((), str(tmp_path / "config.yaml"), "access-token")
    (tmp_path / "config.yaml").write_text("context: default\naccess-token: dop_v1_x\n")
    assert credentials.find("DO", yaml) == "dop_v1_x"


def test_a_cloud_without_credentials_says_which_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RUNPOD_API_KEY", "VAST_API_KEY", "VERDA_CLIENT_ID", "DATACRUNCH_CLIENT_ID", "NOVITA_API_KEY",
                 "DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for provider, variable in ((sky.RunPod(), "RUNPOD_API_KEY"), (sky.VastAI(), "VAST_API_KEY"),
                               (sky.Verda(), "VERDA_CLIENT_ID"), (sky.DigitalOcean(), "DIGITALOCEAN_TOKEN"),
                               (sky.Novita(), "NOVITA_API_KEY")):
        with pytest.raises(CredentialsError, match=variable):
            provider.offers(sky.Spec(provider=provider))


def test_names_say_pool_and_owner_and_only_ours_dead_pools_are_orphans() -> None:
    name = naming.machine_name("0123456789abcdef", 3)
    assert naming.parse(name) == naming.Named("0123456789ab", naming.owner_tag(), 3)
    assert naming.parse("my-own-server") is None
    assert naming.orphan_reason(name) == "its pool is not open on this machine any more"
    assert naming.orphan_reason(name.replace(naming.owner_tag(), "ffffff")) is None


def test_offers_fit_the_spec_and_follow_the_allocation() -> None:
    kinds = [
        MachineType("small", 2, 4, 0.05, 0.02), MachineType("big", 8, 32, 0.30, 0.10),
        MachineType("gpu", 8, 32, 0.90, 0.40, accelerator="NVIDIA L4", accelerator_count=1, accelerator_memory_gb=24),
    ]
    spec = sky.Spec(provider=sky.Local(), vcpus=4)
    assert [(o.instance_type, o.spot) for o in pricing.offers("x", kinds, spec)] == [("big", True), ("big", False)]
    both = pricing.offers("x", kinds, sky.Spec(provider=sky.Local(), allocation="cheapest"))
    assert [o.hourly_price for o in both] == sorted(o.hourly_price for o in both)
    gpu = pricing.offers("x", kinds, sky.Spec(provider=sky.Local(), accelerator=sky.accelerators.L4(), allocation="on-demand"))
    assert [(o.instance_type, o.accelerator) for o in gpu] == [("gpu", "L4")]
    with pytest.raises(sky.NoAvailableProviderError, match=r"cheapest is small \(spot\) at \$0.0200/h"):
        pricing.allowed("X", pricing.offers("x", kinds, sky.Spec(provider=sky.Local())), sky.Spec(provider=sky.Local(), max_hourly_cost=0.01), "here")


def test_container_images() -> None:
    assert sky.containers.cuda("12.9", variant="devel", ubuntu="24.04").tag == "nvidia/cuda:12.9.0-devel-ubuntu24.04"
    assert sky.containers.ubuntu("22.04").tag == "ubuntu:22.04"
    assert sky.containers.pytorch("2.8", cuda="12.8").tag == "pytorch/pytorch:2.8.0-cuda12.8-cudnn9-runtime"
    assert sky.containers.runpod_pytorch("2.8").tag.startswith("runpod/pytorch:2.8.0-py3.11-cuda12.8.1")
    image = sky.DockerImage.of("me/train:1", cuda="12.8", ubuntu="22.04")
    assert (image.tag, image.cuda, image.ubuntu) == ("me/train:1", "12.8", "22.04") and sky.DockerImage.of(image) is image
    assert sky.RunPod(container_image="me/train:1").container_image == sky.DockerImage("me/train:1")
    assert sky.VastAI(docker_image=image).docker_image is image and sky.Novita(docker_image=image).docker_image is image
    with pytest.raises(ValueError, match=r"containers.cuda.variant='huge' is not valid"):
        sky.containers.cuda("12.8", variant="huge")
    with pytest.raises(ValueError, match=r"VastAI.docker_image=3 is not valid"):
        sky.VastAI(docker_image=3)
    for make, field in ((lambda i: sky.AWS(ami=i), "AWS.ami"), (lambda i: sky.Verda(image_name=i), "Verda.image_name"),
                        (lambda i: sky.DigitalOcean(image_slug=i), "DigitalOcean.image_slug")):
        with pytest.raises(ValueError, match=rf"{field}=.*starts virtual machines, not containers"):
            make(sky.containers.cuda())
    with pytest.raises(ValueError, match=r"DigitalOcean.region='mars1' is not valid: use one of 'nyc1'"):
        sky.DigitalOcean(region="mars1")
