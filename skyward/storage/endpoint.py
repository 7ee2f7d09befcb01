"""Endpoint URLs: validation, and the region requests to them are signed for."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from skyward.api.validation import fail

#: Signing region where the endpoint's host does not say one (most S3-compatible
#: services accept any region, and AWS itself redirects to the bucket's).
DEFAULT_REGION = "us-east-1"


def check_endpoint(owner: str, field: str, value: Any) -> None:
    """Raise ValueError unless ``value`` is an http(s) URL with a host."""
    if not isinstance(value, str):
        raise fail(
            owner, field, value,
            f"it must be a str URL such as 'https://s3.us-east-1.amazonaws.com', "
            f"got {type(value).__name__}",
        )
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(
            owner, field, value,
            "it must be an http:// or https:// URL with a host, e.g. "
            "'https://s3.us-east-1.amazonaws.com' or 'http://127.0.0.1:9000'",
        )


def signing_region(endpoint: str) -> str:
    """The region requests to ``endpoint`` are signed for (SigV4).

    ``s3.<region>.<domain>.<tld>`` hosts (AWS, Wasabi, Backblaze) carry it; Cloudflare R2
    wants ``auto``; anything else gets ``us-east-1``."""
    host = (urlsplit(endpoint).hostname or "").lower()
    if host.endswith(".r2.cloudflarestorage.com"):
        return "auto"
    labels = host.split(".")
    if len(labels) == 4 and labels[0] == "s3" and not labels[-1].isdigit():
        return labels[1]
    return DEFAULT_REGION
