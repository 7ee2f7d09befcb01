"""``sky providers check CLOUD --launch`` as a user runs it, against DigitalOcean's local
fake (every cloud's run of the same check is in test_conformance.py): it asks before
spending, refuses to spend without a terminal or ``--yes``, reports each phase, the cost
and the result, and on a failure lists the API calls that answered an error, leaving
nothing behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from e2e.cloud.clouds import Cloud, started

from skyward.cli.main import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[Cloud]:
    with started("digitalocean", lab) as running:
        yield running


def _machines(cloud: Cloud) -> int:
    assert cloud.fake is not None
    return len(cloud.fake.live(""))


def test_launch_with_yes_reports_every_phase_and_the_cost(cloud: Cloud) -> None:
    shown = CliRunner().invoke(main, ["providers", "check", "digitalocean", "--launch", "--yes"])
    assert shown.exit_code == 0, shown.output
    for text in ("machine: ", "provision", "task", "teardown (confirmed)", "cost: $", "result: ok"):
        assert text in shown.output, shown.output
    assert _machines(cloud) == 0


def test_launch_asks_and_a_no_creates_nothing(cloud: Cloud) -> None:
    before = len(cloud.fake.bodies("POST", "/v2/droplets")) if cloud.fake is not None else 0
    runner = CliRunner()
    shown = runner.invoke(main, ["providers", "check", "digitalocean", "--launch"], input="n\n")
    assert "/h" in shown.stderr and "?" in shown.stderr, shown.stderr  # the question names the price
    assert shown.exit_code == 1 and "not confirmed" in shown.stdout, shown.stdout
    unanswered = runner.invoke(main, ["providers", "check", "digitalocean", "--launch"], input="")
    assert unanswered.exit_code == 1 and "pass --yes" in unanswered.stdout, unanswered.stdout
    assert cloud.fake is not None and len(cloud.fake.bodies("POST", "/v2/droplets")) == before


def test_launch_json_names_the_failed_api_calls_when_the_cloud_refuses(cloud: Cloud) -> None:
    cloud.refuse_all()
    try:
        shown = CliRunner().invoke(main, ["providers", "check", "digitalocean", "--launch", "--yes", "--json"])
    finally:
        cloud.allow_all()
    assert shown.exit_code == 1, shown.output
    report = json.loads(shown.stdout)
    assert report["error"] and "capacity" in report["error"].lower(), report
    assert any(call["method"] == "POST" and call["path"] == "/v2/droplets" for call in report["failed_calls"]), report
    assert cloud.leftovers(report["pool"]) == []


def test_launch_takes_one_cloud_and_its_options_need_it() -> None:
    runner = CliRunner()
    several = runner.invoke(main, ["providers", "check", "digitalocean", "runpod", "--launch"])
    assert several.exit_code == 2 and "exactly one cloud" in several.output
    stray = runner.invoke(main, ["providers", "check", "digitalocean", "--yes"])
    assert stray.exit_code == 2 and "go with --launch" in stray.output
