"""An API address a user overrides (``SKYWARD_<CLOUD>_API_URL``, boto3's endpoint
settings) never carries a credential in the clear: https, or http to this machine only
(the tests' fakes listen on http://127.0.0.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skyward.providers.aws import session
from skyward.providers.cloud.http import base_url
from skyward.providers.cloud.urls import check_api_url
from skyward.providers.digitalocean.api import DigitalOceanAPI
from skyward.providers.gcp.api import GCPAPI
from skyward.providers.hyperstack.api import HyperstackAPI
from skyward.providers.jarvislabs.api import JarvisLabsAPI
from skyward.providers.lambda_cloud.api import LambdaAPI
from skyward.providers.massedcompute.api import MassedComputeAPI
from skyward.providers.novita.api import NovitaAPI
from skyward.providers.runpod.api import RunPodAPI
from skyward.providers.scaleway.api import ScalewayAPI
from skyward.providers.tensordock.api import TensorDockAPI
from skyward.providers.vastai.api import VastAPI
from skyward.providers.verda.api import VerdaAPI
from skyward.providers.vultr.api import VultrAPI

CLOUDS: dict[str, tuple[Callable[[], Any], dict[str, str]]] = {
    "runpod": (lambda: RunPodAPI("SECURE"), {"RUNPOD_API_KEY": "k"}),
    "runpod_graphql": (lambda: RunPodAPI("SECURE"), {"RUNPOD_API_KEY": "k"}),
    "vastai": (VastAPI, {"VAST_API_KEY": "k"}),
    "verda": (VerdaAPI, {"VERDA_CLIENT_ID": "id", "VERDA_CLIENT_SECRET": "s"}),
    "digitalocean": (DigitalOceanAPI, {"DIGITALOCEAN_TOKEN": "k"}),
    "novita": (NovitaAPI, {"NOVITA_API_KEY": "k"}),
    "hyperstack": (lambda: HyperstackAPI("CANADA-1"), {"HYPERSTACK_API_KEY": "k"}),
    "tensordock": (TensorDockAPI, {"TENSORDOCK_API_TOKEN": "k"}),
    "vultr": (VultrAPI, {"VULTR_API_KEY": "k"}),
    "lambda": (LambdaAPI, {"LAMBDA_API_KEY": "k"}),
    "scaleway": (lambda: ScalewayAPI("fr-par-2"), {"SCW_SECRET_KEY": "k", "SCW_DEFAULT_PROJECT_ID": "p"}),
    "jarvislabs": (lambda: JarvisLabsAPI("pytorch"), {"JL_API_KEY": "k"}),
    "massed_compute": (MassedComputeAPI, {"MASSED_COMPUTE_API_KEY": "k"}),
    "gcp": (lambda: GCPAPI("project-1", "us-central1-a", "default", dict), {}),
}


@pytest.mark.parametrize(
    "url",
    ["https://api.example.com/v1", "http://127.0.0.1:8080", "http://127.5.0.1/v1", "http://[::1]:9000", "http://LOCALHOST:1"],
)
def test_https_anywhere_and_http_to_this_machine_are_accepted(url: str) -> None:
    assert check_api_url("SKYWARD_ACME_API_URL", url, "the key") == url


@pytest.mark.parametrize(
    "url",
    ["http://api.example.com", "http://10.0.0.5:8080", "http://0.0.0.0:80", "http://[::ffff:10.0.0.1]",
     "ftp://api.example.com", "api.example.com", "https://", "http://localhost.example.com"],
)
def test_anything_else_is_refused_naming_the_variable_the_value_and_the_fix(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_api_url("SKYWARD_ACME_API_URL", url, "the key")
    assert str(refused.value).startswith(f"SKYWARD_ACME_API_URL={url!r} is not valid: the key is sent")
    assert "use an https:// URL" in str(refused.value)


def test_a_password_in_the_url_is_not_shown() -> None:
    with pytest.raises(ValueError, match=r"'http://api\.example\.com/v1' is not valid") as refused:
        check_api_url("SKYWARD_ACME_API_URL", "http://user:hunter2@api.example.com/v1", "the key")
    assert "hunter2" not in str(refused.value)


def test_base_url_is_the_default_unless_the_variable_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKYWARD_ACME_API_URL", raising=False)
    assert base_url("acme", "https://api.acme.com") == "https://api.acme.com"
    monkeypatch.setenv("SKYWARD_ACME_API_URL", "http://127.0.0.1:4010")
    assert base_url("acme", "https://api.acme.com") == "http://127.0.0.1:4010"


@pytest.mark.parametrize("key", sorted(CLOUDS))
def test_every_machine_cloud_refuses_a_plain_http_override(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    make, credentials = CLOUDS[key]
    for name, value in credentials.items():
        monkeypatch.setenv(name, value)
    variable = f"SKYWARD_{key.upper()}_API_URL"
    monkeypatch.setenv(variable, "http://api.example.com")
    with pytest.raises(ValueError, match=rf"^{variable}='http://api\.example\.com' is not valid: .*https://"):
        make()
    monkeypatch.setenv(variable, "http://127.0.0.1:4010")
    make()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy AWS keys, no profile, no endpoint setting, fresh sessions."""
    monkeypatch.setattr(session, "_sessions", {})
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL"])
def test_aws_refuses_a_plain_http_endpoint_variable(aws: None, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "http://ec2.example.com")
    with pytest.raises(ValueError, match=rf"^{variable}='http://ec2\.example\.com' is not valid: .*https://"):
        session.client("ec2", "us-east-1")


def test_aws_refuses_a_plain_http_endpoint_in_its_config_file(aws: None, tmp_path: Path) -> None:
    (tmp_path / "config").write_text("[default]\nendpoint_url = http://ec2.example.com\n")
    with pytest.raises(ValueError, match=r"^endpoint_url \(AWS config file\)='http://ec2\.example\.com' is not valid"):
        session.client("ec2", "us-east-1")


def test_aws_accepts_its_own_endpoints_and_a_local_emulator(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert session.client("ec2", "us-east-1").meta.endpoint_url.startswith("https://ec2.us-east-1.")
    monkeypatch.setattr(session, "_sessions", {})
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    assert session.client("ec2", "us-east-1").meta.endpoint_url == "http://127.0.0.1:5000"
