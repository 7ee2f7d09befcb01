"""sky.Storage configuration without a network: validation, presets (endpoints,
addressing, signing regions), secrets kept out of reprs and errors, pickling, the
progress bar, and that importing skyward leaves boto3 alone."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys

import pytest
from rich.console import Console

import skyward as sky
from skyward.storage import RichTransferBar, TransferUpdate
from skyward.storage.endpoint import is_aws_s3, signing_region
from skyward.storage.hyperstack import HyperstackKeyPart


def test_fields_and_defaults() -> None:
    storage = sky.Storage("https://s3.example.com")
    assert (storage.access_key, storage.secret_key, storage.path_style) == (None, None, False)
    assert storage.ship_client_credentials is False
    assert storage == sky.Storage(endpoint="https://s3.example.com")


@pytest.mark.parametrize(
    ("preset", "endpoint", "path_style", "region"),
    [
        (sky.storage.S3(region="eu-west-1"), "https://s3.eu-west-1.amazonaws.com", False,
         "eu-west-1"),
        (sky.storage.S3(), "https://s3.us-east-1.amazonaws.com", False, "us-east-1"),
        (sky.storage.R2(account_id="abc123", access_key="k", secret_key="s"),
         "https://abc123.r2.cloudflarestorage.com", True, "auto"),
        (sky.storage.GCS(access_key="k", secret_key="s"), "https://storage.googleapis.com",
         True, "us-east-1"),
        (sky.storage.Wasabi(region="eu-central-1", access_key="k", secret_key="s"),
         "https://s3.eu-central-1.wasabisys.com", False, "eu-central-1"),
        (sky.storage.Backblaze(region="us-west-004", key_id="kid", app_key="app"),
         "https://s3.us-west-004.backblazeb2.com", False, "us-west-004"),
        (sky.storage.Hyperstack(api_key="hk"), "https://ca1.obj.nexgencloud.io", True,
         "us-east-1"),
    ],
)
def test_presets_build_endpoint_addressing_and_region(
    preset: sky.Storage, endpoint: str, path_style: bool, region: str
) -> None:
    assert isinstance(preset, sky.Storage)
    assert (preset.endpoint, preset.path_style, preset.region) == (endpoint, path_style, region)


def test_preset_keys_land_in_the_right_fields() -> None:
    backblaze = sky.storage.Backblaze(region="us-west-004", key_id="kid", app_key="app")
    assert (backblaze.access_key, backblaze.secret_key) == ("kid", "app")
    s3 = sky.storage.S3(region="us-east-2", access_key="ak", secret_key="sk")
    assert (s3.access_key, s3.secret_key) == ("ak", "sk")
    hyperstack = sky.storage.Hyperstack(api_key="hk", region="CANADA-1")
    assert isinstance(hyperstack.access_key, HyperstackKeyPart)
    assert isinstance(hyperstack.secret_key, HyperstackKeyPart)


def test_presets_are_keyword_only_and_check_their_fields() -> None:
    with pytest.raises(TypeError):
        sky.storage.S3("us-east-1")  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"S3\.region='us east'"):
        sky.storage.S3(region="us east")
    with pytest.raises(ValueError, match=r"R2\.account_id=''"):
        sky.storage.R2(account_id="", access_key="k", secret_key="s")
    with pytest.raises(ValueError, match=r"Hyperstack\.region='NORWAY-1'.*endpoint="):
        sky.storage.Hyperstack(api_key="hk", region="NORWAY-1")
    assert sky.storage.Hyperstack(
        api_key="hk", region="NORWAY-1", endpoint="https://no1.example.com"
    ).endpoint == "https://no1.example.com"
    with pytest.raises(ValueError, match=r"Hyperstack\.api_key of type int"):
        sky.storage.Hyperstack(api_key=42)  # type: ignore[arg-type]


def test_hyperstack_reads_its_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERSTACK_API_KEY", "from-env")
    storage = sky.storage.Hyperstack()
    assert isinstance(storage.access_key, HyperstackKeyPart)
    assert storage.access_key._key._api_key == "from-env"
    assert sky.storage.Hyperstack(api_key="given").access_key._key._api_key == "given"
    monkeypatch.setenv("HYPERSTACK_API_KEY", "  ")
    with pytest.raises(ValueError, match=r"Hyperstack\.api_key is not set.*HYPERSTACK_API_KEY"):
        sky.storage.Hyperstack()
    monkeypatch.delenv("HYPERSTACK_API_KEY")
    with pytest.raises(ValueError, match=r"api_key=\.\.\. or set HYPERSTACK_API_KEY"):
        sky.storage.Hyperstack()


@pytest.mark.parametrize(
    "endpoint", ["s3.amazonaws.com", "ftp://host", "https://", "", "http:///path"]
)
def test_endpoint_must_be_an_http_url(endpoint: str) -> None:
    with pytest.raises(ValueError, match=r"Storage\.endpoint=.*http:// or https:// URL"):
        sky.Storage(endpoint)


def test_bad_field_types_name_field_and_type_never_the_value() -> None:
    with pytest.raises(ValueError, match=r"Storage\.endpoint=42 .* got int"):
        sky.Storage(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as caught:
        sky.Storage("https://h", access_key="k", secret_key=b"top-secret")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "Storage.secret_key of type bytes" in message and "callable" in message
    assert "top-secret" not in message
    with pytest.raises(ValueError, match=r"Storage\.access_key is an empty string"):
        sky.Storage("https://h", access_key="", secret_key="s")
    with pytest.raises(ValueError, match="go together"):
        sky.Storage("https://h", access_key="k")
    with pytest.raises(ValueError, match=r"Storage\.path_style='yes'"):
        sky.Storage("https://h", path_style="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://s3.amazonaws.com",
        "https://s3.eu-west-1.amazonaws.com",
        "https://s3-us-west-2.amazonaws.com",
        "https://s3.dualstack.ap-south-1.amazonaws.com",
        "https://s3-fips.us-gov-west-1.amazonaws.com",
        "https://my-bucket.s3.us-east-1.amazonaws.com",
        "https://ap-123456789012.s3-accesspoint.us-east-1.amazonaws.com",
        "https://s3.cn-north-1.amazonaws.com.cn",
        "https://S3.US-EAST-1.AMAZONAWS.COM:443/",
    ],
)
def test_aws_s3_endpoints_may_ship_the_client_credential_chain(endpoint: str) -> None:
    assert is_aws_s3(endpoint)
    assert sky.Storage(endpoint, ship_client_credentials=True).ship_client_credentials
    assert sky.storage.S3(region="eu-west-1", ship_client_credentials=True) == sky.Storage(
        "https://s3.eu-west-1.amazonaws.com", ship_client_credentials=True
    )


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://s3.us-east-1.amazonaws.com",  # in the clear
        "http://127.0.0.1:9000",
        "https://s3.eu-central-1.wasabisys.com",
        "https://acct.r2.cloudflarestorage.com",
        "https://s3.us-east-1.amazonaws.com.example.net",
        "https://s3.us-east-1.amazonaws.com@example.net",
        "https://ec2-3-80-1-2.compute-1.amazonaws.com",  # someone's instance
        "https://s3-files-123.us-east-1.elb.amazonaws.com",  # someone's load balancer
    ],
)
def test_the_client_credential_chain_is_not_shipped_to_another_service(endpoint: str) -> None:
    assert not is_aws_s3(endpoint)
    with pytest.raises(ValueError) as caught:
        sky.Storage(endpoint, ship_client_credentials=True)
    message = str(caught.value)
    assert message.startswith("Storage.ship_client_credentials=True is not valid")
    assert "sent only to AWS's own S3" in message and endpoint in message
    assert "access_key= and secret_key= scoped to the bucket" in message


def test_ship_client_credentials_is_a_bool_for_a_storage_without_keys() -> None:
    with pytest.raises(ValueError, match=r"Storage\.ship_client_credentials='yes'.*True or False"):
        sky.Storage("https://s3.amazonaws.com", ship_client_credentials="yes")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"Storage\.ship_client_credentials=True .*keys of its own"
    ):
        sky.storage.S3(access_key="ak", secret_key="sk", ship_client_credentials=True)


def test_repr_and_resolved_repr_hide_keys() -> None:
    storage = sky.Storage("https://h", access_key="AKIAVISIBLE", secret_key="s3cr3t-value")
    assert "s3cr3t-value" not in repr(storage) and "AKIAVISIBLE" not in repr(storage)
    with storage.credentials() as resolved:
        assert resolved.secret_key == "s3cr3t-value"
        assert "s3cr3t-value" not in repr(resolved)


def test_credential_callables_are_resolved_and_their_failures_explained() -> None:
    async def secret() -> str:
        return "from-async"

    storage = sky.Storage("https://h", access_key=lambda: "from-sync", secret_key=secret)
    with storage.credentials() as resolved:
        assert (resolved.access_key, resolved.secret_key) == ("from-sync", "from-async")
    broken = sky.Storage("https://h", access_key=lambda: 5, secret_key="s")  # type: ignore
    with (
        pytest.raises(sky.storage.StorageCredentialsError, match="returned int"),
        broken.credentials(),
    ):
        pass


def test_storage_pickles_closed_and_equal() -> None:
    storage = sky.storage.Wasabi(region="us-east-2", access_key="k", secret_key="s")
    copy = pickle.loads(pickle.dumps(storage))
    assert copy == storage
    with pytest.raises(RuntimeError, match="with storage:"):
        copy.ls("bucket")


def test_signing_region_from_the_endpoint_host() -> None:
    assert signing_region("https://s3.ap-south-1.amazonaws.com") == "ap-south-1"
    assert signing_region("https://s3.amazonaws.com") == "us-east-1"
    assert signing_region("http://127.0.0.1:9000") == "us-east-1"
    assert signing_region("https://acct.r2.cloudflarestorage.com") == "auto"


def test_rich_transfer_bar_draws_and_clears_a_bar_per_transfer() -> None:
    out = io.StringIO()
    bar = RichTransferBar(Console(file=out, force_terminal=True, width=120))
    total = 10 * 1024 * 1024
    for done in (0, total // 2, total):
        bar(TransferUpdate("upload", "bkt", "model.pt", done, total))
    bar(TransferUpdate("upload", "bkt", "model.pt", total, total, finished=True))
    assert "upload s3://bkt/model.pt" in out.getvalue()
    assert bar._progress is None  # stopped once no transfer runs


def test_import_skyward_does_not_import_boto3() -> None:
    code = "import sys, skyward; print('boto3' in sys.modules, 'botocore' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_resolve_calls_each_credential_once_and_keeps_strings() -> None:
    calls: list[str] = []

    def access() -> str:
        calls.append("access")
        return "AKIA-from-a-vault"

    async def secret() -> str:
        calls.append("secret")
        return "s3cr3t"

    storage = sky.Storage("http://127.0.0.1:9000", access_key=access, secret_key=secret, path_style=True)
    resolved = storage.resolve()
    assert (resolved.access_key, resolved.secret_key, resolved.path_style) == ("AKIA-from-a-vault", "s3cr3t", True)
    assert calls == ["access", "secret"]
    assert pickle.loads(pickle.dumps(resolved)).secret_key == "s3cr3t", "a resolved storage pickles"
    assert "s3cr3t" not in repr(resolved)
    chain = sky.Storage("https://s3.us-east-1.amazonaws.com")
    assert chain.resolve() is chain


def test_resolve_refuses_a_leased_credential_and_names_it() -> None:
    class Minted:
        def __call__(self) -> str:
            return "minted"

        def release(self) -> None:
            raise AssertionError("nothing was leased")

    storage = sky.Storage("http://127.0.0.1:9000", access_key="plain", secret_key=Minted())
    with pytest.raises(ValueError, match=r"Storage.secret_key is a leased credential.*storage.credentials\(\)"):
        storage.resolve()
