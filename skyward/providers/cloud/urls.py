"""API addresses a user may override: a credential must never cross the network in the
clear, so an override is https, or http to this machine only (the tests' fakes)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def check_api_url(variable: str, url: str, credential: str) -> str:
    """``url`` (the value of ``variable``), unless it would send ``credential`` in the
    clear: ValueError for a URL that is neither https:// nor http:// to a loopback host
    (127.0.0.0/8, ::1, localhost)."""
    parts = urlsplit(url)
    if (parts.scheme == "https" and parts.hostname) or (parts.scheme == "http" and is_loopback(parts.hostname)):
        return url
    shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    raise ValueError(
        f"{variable}={shown!r} is not valid: {credential} is sent to this address, and only https:// "
        "keeps it secret on the way; use an https:// URL (http:// is accepted only to this "
        "machine: 127.0.0.1, ::1 or localhost)"
    )


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine: localhost, 127.0.0.0/8 or ::1."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
