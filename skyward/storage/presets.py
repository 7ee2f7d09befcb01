"""Storage presets for common S3-compatible services: the endpoint and the addressing
style each one wants, from a few keyword arguments.

Addressing: AWS S3, Wasabi and Backblaze serve buckets as subdomains (virtual-host
style, AWS's default for new buckets); R2, GCS and Hyperstack are addressed by path
(R2's and GCS's S3 interfaces document path style, Hyperstack serves no subdomains)."""

from __future__ import annotations

import os

from skyward.core.validation import fail
from skyward.storage import hyperstack
from skyward.storage.client import Storage
from skyward.storage.credentials import Credential


def S3(
    *,
    region: str = "us-east-1",
    access_key: Credential | None = None,
    secret_key: Credential | None = None,
    ship_client_credentials: bool = False,
) -> Storage:
    """Amazon S3 in ``region``; no keys means boto3's credential chain (environment,
    ~/.aws, SSO, an instance role). A remote pool's nodes get that chain for a Volume of
    this storage only with ``ship_client_credentials=True`` (see ``sky.Storage``)."""
    _check_label("S3", "region", region)
    return Storage(
        endpoint=f"https://s3.{region}.amazonaws.com",
        access_key=access_key,
        secret_key=secret_key,
        ship_client_credentials=ship_client_credentials,
    )


def R2(*, account_id: str, access_key: Credential, secret_key: Credential) -> Storage:
    """Cloudflare R2 of the account ``account_id``."""
    _check_label("R2", "account_id", account_id)
    return Storage(
        endpoint=f"https://{account_id}.r2.cloudflarestorage.com",
        access_key=access_key,
        secret_key=secret_key,
        path_style=True,
    )


def GCS(*, access_key: Credential, secret_key: Credential) -> Storage:
    """Google Cloud Storage through its S3-compatible XML API, with HMAC keys."""
    return Storage(
        endpoint="https://storage.googleapis.com",
        access_key=access_key,
        secret_key=secret_key,
        path_style=True,
    )


def Wasabi(
    *, region: str = "us-east-1", access_key: Credential, secret_key: Credential
) -> Storage:
    """Wasabi in ``region``."""
    _check_label("Wasabi", "region", region)
    return Storage(
        endpoint=f"https://s3.{region}.wasabisys.com",
        access_key=access_key,
        secret_key=secret_key,
    )


def Backblaze(*, region: str, key_id: Credential, app_key: Credential) -> Storage:
    """Backblaze B2's S3 API in ``region`` (e.g. ``us-west-004``), with an application
    key (``key_id`` is its ID)."""
    _check_label("Backblaze", "region", region)
    return Storage(
        endpoint=f"https://s3.{region}.backblazeb2.com",
        access_key=key_id,
        secret_key=app_key,
    )


def Hyperstack(
    *, api_key: str | None = None, region: str = hyperstack.DEFAULT_REGION, endpoint: str | None = None
) -> Storage:
    """Hyperstack object storage in ``region`` with an S3 key pair minted from the
    Hyperstack API key (``api_key``, else ``$HYPERSTACK_API_KEY``) when the storage opens
    and revoked when it closes. ValueError when neither holds a key.

    The endpoint comes from ``hyperstack.S3_ENDPOINTS`` (CANADA-1:
    ``https://ca1.obj.nexgencloud.io``); another region needs ``endpoint=``."""
    if api_key is None:
        api_key = os.environ.get(hyperstack.API_KEY_ENV, "").strip()
        if not api_key:
            raise ValueError(
                f"Hyperstack.api_key is not set and ${hyperstack.API_KEY_ENV} is empty: pass "
                f"api_key=... or set {hyperstack.API_KEY_ENV} to a key from the Hyperstack console"
            )
    if not isinstance(api_key, str) or not api_key:
        raise ValueError(
            f"Hyperstack.api_key of type {type(api_key).__name__} is not valid: pass the "
            f"Hyperstack API key as a non-empty str, or leave it out to read ${hyperstack.API_KEY_ENV}"
        )
    _check_label("Hyperstack", "region", region)
    if endpoint is None:
        endpoint = hyperstack.S3_ENDPOINTS.get(region)
        if endpoint is None:
            known = ", ".join(sorted(hyperstack.S3_ENDPOINTS))
            raise fail(
                "Hyperstack", "region", region,
                f"its S3 endpoint is not known (known: {known}); pass endpoint='https://...'",
            )
    key = hyperstack.HyperstackAccessKey(api_key, region)
    return Storage(
        endpoint=endpoint,
        access_key=hyperstack.HyperstackKeyPart(key, 0),
        secret_key=hyperstack.HyperstackKeyPart(key, 1),
        path_style=True,
    )


def _check_label(owner: str, field: str, value: object) -> None:
    """A region or account id: one DNS label's worth of letters, digits and hyphens."""
    if not isinstance(value, str) or not value or not all(
        char.isalnum() or char == "-" for char in value
    ):
        raise fail(owner, field, value, "it must be a non-empty str of letters, digits and '-'")
