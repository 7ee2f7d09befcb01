"""Endpoint URLs: validation, and the region requests to them are signed for."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from skyward.core.validation import fail

#: Signing region where the endpoint's host does not say one (most S3-compatible
#: services accept any region, and AWS itself redirects to the bucket's).
DEFAULT_REGION = "us-east-1"

_AWS_REGION = r"[a-z]{2}(?:-[a-z]+)+-\d+"
#: The hosts of AWS's S3 (path or virtual-host style, access points, FIPS, dual-stack).
_AWS_S3_HOST = re.compile(
    rf"(?:[a-z0-9.-]+\.)?s3(?:-fips|-accesspoint(?:-fips)?|-external-1|-{_AWS_REGION})?"
    rf"(?:\.dualstack)?(?:\.{_AWS_REGION})?\.amazonaws\.com(?:\.cn)?"
)


def check_endpoint(owner: str, field: str, value: object) -> None:
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


def is_aws_s3(endpoint: str) -> bool:
    """Whether ``endpoint`` is an https endpoint of AWS's own S3: ``s3.<region>``,
    ``s3-<region>``, ``s3-fips``, ``s3-accesspoint``, ``dualstack``, a bucket or access
    point in front, under ``amazonaws.com`` (or ``.com.cn``). Other hosts under
    amazonaws.com (an EC2 instance's, a load balancer's) are AWS customers' own."""
    parts = urlsplit(endpoint)
    return parts.scheme == "https" and bool(_AWS_S3_HOST.fullmatch((parts.hostname or "").lower()))
