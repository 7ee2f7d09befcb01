"""``sky dashboard [NAME]``: the pool daemon's live web dashboard of the kept pools
(docs/dashboard.md), opened in the browser with a one-time link (starting the daemon
when none runs)."""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import quote

import click

from skyward.cli.output import emit_object
from skyward.core.private_dir import replace_private
from skyward.providers.daemon_client import api_endpoint

CHECK_TIMEOUT = 10.0
"""Seconds the daemon's API has to answer."""


@click.command("dashboard")
@click.argument("name", required=False, default="")
@click.option("--no-browser", is_flag=True, help="only print the link")
@click.option("--json", "as_json", is_flag=True, help="print JSON (the link; implies --no-browser)")
def dashboard(name: str, no_browser: bool, as_json: bool) -> None:
    """Open the live web dashboard of the kept pools (on NAME, when given) in the
    browser: served by the pool daemon on 127.0.0.1, through a link that works once and
    for two minutes (it sets a cookie in the browser that opens it)."""
    import webbrowser

    import httpx

    try:
        endpoint = api_endpoint()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    token = Path(endpoint.token_file).read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    try:
        if name:
            found = httpx.get(f"{endpoint.url}/pools/{quote(name, safe='')}", headers=headers, timeout=CHECK_TIMEOUT)
            if found.status_code == 404:
                raise click.ClickException(f"no pool named {name!r} is kept (sky ls lists the pools)")
            found.raise_for_status()
        made = httpx.post(f"{endpoint.url}/dashboard/links", params={"pool": name} if name else None,
                          headers=headers, timeout=CHECK_TIMEOUT)
        made.raise_for_status()
    except httpx.HTTPError as exc:
        raise click.ClickException(f"the pool daemon's HTTP API at {endpoint.url} does not answer: {exc}") from None
    link = str(made.json()["url"])
    if as_json:
        emit_object({"url": link, "dashboard": f"{endpoint.url}/dashboard/", "pid": endpoint.pid})
        return
    click.echo(f"dashboard: {link}\n(the link opens it once, within two minutes; run sky dashboard again for another)")
    if not no_browser and not webbrowser.open(Path(_redirect_file(Path(endpoint.token_file).parent, link)).as_uri()):
        click.echo("no browser could be opened here: open the link above in yours (on this machine)")


def _redirect_file(directory: Path, link: str) -> str:
    """A page in the daemon's private ``directory`` (0600) that sends the browser on to
    ``link``: what the browser is started with, so the one-time token is never on a
    command line, where every user of the machine can read it in /proc (as Jupyter does)."""
    path = str(directory / "dashboard-open.html")
    target = html.escape(link, quote=True)
    replace_private(path, f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
                          f'<title>skyward dashboard</title><a href="{target}">open the dashboard</a>\n')
    return path
