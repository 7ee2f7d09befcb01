"""``sky api``: where this user's pool daemon serves its HTTP API (docs/kept-pools.md,
"The HTTP API"), starting the daemon when none runs."""

from __future__ import annotations

import http.client
import urllib.parse
from pathlib import Path

import click

from skyward.cli.output import emit_object
from skyward.providers.daemon_client import api_endpoint

CHECK_TIMEOUT = 10.0
"""Seconds the API has to answer the check ``sky api`` makes."""


@click.command("api")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def api(as_json: bool) -> None:
    """Print the pool daemon's HTTP API URL and the file holding its bearer token
    (starting the daemon when none runs; it then stays up 10 minutes after the API's
    last request, and while a pool is kept)."""
    try:
        endpoint = api_endpoint()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    token = Path(endpoint.token_file).read_text().strip()
    try:  # a request: the daemon stays up for the API from now on
        _check(endpoint.url, token)
    except (OSError, http.client.HTTPException) as exc:
        raise click.ClickException(f"the pool daemon's HTTP API at {endpoint.url} does not answer: {exc}") from None
    if as_json:
        emit_object({"url": endpoint.url, "token_file": endpoint.token_file, "pid": endpoint.pid})
        return
    click.echo(f"HTTP API: {endpoint.url}\ntoken file: {endpoint.token_file}\n"
               f"e.g. curl -H \"Authorization: Bearer $(cat {endpoint.token_file})\" {endpoint.url}/pools")


def _check(url: str, token: str) -> None:
    """One authenticated ``GET /pools`` to the API at ``url`` (loopback: the standard
    library's client, a tenth of httpx's import); HTTPException unless it answers 200."""
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=CHECK_TIMEOUT)
    try:
        connection.request("GET", "/pools", headers={"Authorization": f"Bearer {token}"})
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise http.client.HTTPException(f"GET /pools answered {answer.status} {answer.reason}")
    finally:
        connection.close()
