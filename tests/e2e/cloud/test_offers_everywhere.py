"""``sky.offers()`` with no provider asks every cloud whose credentials this machine has:
all fourteen clouds run here at once (the local AWS and a fake of each other cloud's API),
and an A100 is priced by each that sells one, cheapest first, each price marked live or
from a dated snapshot. A cloud without credentials is not asked; one whose API cannot be
read is left out with a warning naming it, by ``sky offers`` too (and fails the call when
it was asked for by name); with no credentials at all the shipped snapshot's on-demand
prices are listed, marked as such, with a warning saying where credentials are looked for."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cloud.aws_emulator import AWSEmulator
from cloud.fake_cloud import FakeCloud
from cloud.fake_gcp import FakeGCP
from e2e.cloud.clouds import CLOUDS, FAKES
from e2e.cloud.conftest import environment

import skyward as sky
from skyward.providers import names
from skyward.providers.base import PriceSnapshotWarning
from skyward.providers.gcp.prices import cache_folder

A100 = sky.accelerators.A100()
WITHOUT_A100_80GB = {"digitalocean", "scaleway", "lambda"}
"""Clouds that sell no single A100 80GB (Lambda's 80 GB A100s come eight to a machine)."""
SNAPSHOT = re.compile(r"snapshot \d{4}-\d{2}-\d{2}")
SKY = os.path.join(os.path.dirname(sys.executable), "sky")


def credential_variables() -> set[str]:
    return {variable for known in names.KNOWN.values() for source in known.credentials for variable in source.env}


@pytest.fixture(scope="module")
def everywhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, FakeCloud]]:
    """Every cloud's API up and its credentials set (nothing else: HOME is empty)."""
    fakes = {name: FAKES[name][0]() for name in FAKES}
    with contextlib.ExitStack() as stack:
        for fake in fakes.values():
            fake.start()
            stack.callback(fake.stop)
        aws = stack.enter_context(AWSEmulator())
        values = {"HOME": str(tmp_path_factory.mktemp("home"))}
        for source in (aws, *fakes.values()):
            values.update(source.env())
        unset = {variable: os.environ.pop(variable) for variable in credential_variables() - set(values) if variable in os.environ}
        stack.callback(os.environ.update, unset)
        stack.enter_context(environment(values))
        yield fakes


def test_an_a100_is_priced_by_every_cloud_that_sells_one_cheapest_first(everywhere: dict[str, FakeCloud]) -> None:
    found = sky.offers(accelerator=A100)
    assert {o.provider for o in found} == set(CLOUDS) - WITHOUT_A100_80GB
    assert [o.hourly_price for o in found] == sorted(o.hourly_price for o in found)
    assert all(o.accelerator == "A100" and o.hourly_price > 0 for o in found)
    assert all(o.price_source == "live" or SNAPSHOT.fullmatch(o.price_source) for o in found)
    assert {o.price_source for o in found if o.provider == "gcp"} == {"live"}, "GCP's from its Billing Catalog"
    assert {o.price_source for o in found if o.provider == "runpod"} == {"live"}


def test_only_clouds_with_credentials_are_asked(everywhere: dict[str, FakeCloud], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAST_API_KEY")
    monkeypatch.delenv("RUNPOD_API_KEY")
    asked = len(everywhere["vastai"].requests), len(everywhere["runpod"].requests)
    providers = {o.provider for o in sky.offers(accelerator=A100)}
    assert "vastai" not in providers and "runpod" not in providers and "verda" in providers
    assert (len(everywhere["vastai"].requests), len(everywhere["runpod"].requests)) == asked, "not asked at all"


def test_a_cloud_whose_api_fails_is_left_out_with_a_warning_unless_named_by_the_api_and_the_command(
    everywhere: dict[str, FakeCloud], monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket_nobody_listens_on() as url:
        monkeypatch.setenv("SKYWARD_NOVITA_API_URL", url)
        with pytest.warns(sky.CloudSkippedWarning, match="novita left out") as warned:
            providers = {o.provider for o in sky.offers(accelerator=A100)}
        assert "novita" not in providers and "verda" in providers
        assert len([w for w in warned if issubclass(w.category, sky.CloudSkippedWarning)]) == 1
        with pytest.raises(Exception, match="(?i)novita"):
            sky.offers(sky.Novita(), accelerator=A100)
        listed = subprocess.run([SKY, "offers", "-a", "A100", "--limit", "100"], capture_output=True, text=True,
                                timeout=300, env={**os.environ, "COLUMNS": "200"}, check=False)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert "novita left out" in listed.stderr and "novita" not in listed.stdout, listed.stdout + listed.stderr
        assert "verda" in listed.stdout, "the listing goes on without the cloud that failed"


def test_gc_over_every_cloud_leaves_out_one_that_fails_and_says_so(
    everywhere: dict[str, FakeCloud], monkeypatch: pytest.MonkeyPatch,
) -> None:
    def gc() -> subprocess.CompletedProcess[str]:
        return subprocess.run([SKY, "gc", "--dry-run"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "COLUMNS": "200"}, check=False)

    clean = gc()
    assert clean.returncode == 0 and "nothing to clean up" in clean.stdout, clean.stdout + clean.stderr
    asked = len(everywhere["verda"].requests)
    with socket_nobody_listens_on() as url:
        monkeypatch.setenv("SKYWARD_NOVITA_API_URL", url)
        done = gc()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "warning: novita left out" in done.stderr and "not looked in: novita" in done.stderr, done.stderr
    assert "in the clouds that answered" in done.stdout, done.stdout
    assert len(everywhere["verda"].requests) > asked, "the other clouds were still asked"


def test_no_credentials_at_all_lists_the_shipped_snapshot_and_says_where_credentials_are_looked_for(
    everywhere: dict[str, FakeCloud], monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in credential_variables():
        monkeypatch.delenv(variable, raising=False)
    asked = {name: len(fake.requests) for name, fake in everywhere.items()}
    with pytest.warns(PriceSnapshotWarning, match="no cloud credentials.*sky providers list") as warned:
        found = sky.offers(accelerator=A100)
    assert len(warned) == 1
    assert [(o.provider, o.instance_type, o.accelerator_count, o.spot) for o in found] == [("aws", "p4de.24xlarge", 8, False)]
    assert SNAPSHOT.fullmatch(found[0].price_source) and found[0].region == "us-east-1"
    assert {name: len(fake.requests) for name, fake in everywhere.items()} == asked, "no cloud was asked"
    with pytest.warns(PriceSnapshotWarning):
        assert sky.offers(accelerator=A100, allocation="spot") == [], "the snapshot has no spot prices"
    with pytest.raises(ValueError, match="us-east-1, us-west-2"):
        sky.offers(region="eu-west-1")


def test_the_command_lists_every_cloud_and_marks_snapshot_prices(everywhere: dict[str, FakeCloud]) -> None:
    root = Path(__file__).resolve().parents[3]
    gcp = everywhere["gcp"]
    assert isinstance(gcp, FakeGCP)
    shutil.rmtree(cache_folder(), ignore_errors=True)  # GCP's catalog, read by the first test
    gcp.billing_disabled = True  # every cloud's prices are live now: GCP's snapshot, with its 403, shows the mark
    try:
        done = subprocess.run([SKY, "offers", "-a", "A100", "--limit", "100"], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(root / "tests"), "COLUMNS": "200"},
                              check=False)
    finally:
        gcp.billing_disabled = False
    assert done.returncode == 0, done.stdout + done.stderr
    for cloud in set(CLOUDS) - WITHOUT_A100_80GB:
        assert cloud in done.stdout, f"{cloud} missing from sky offers:\n{done.stdout}"
    assert "* not live: from skyward's price snapshot" in done.stdout


@contextlib.contextmanager
def socket_nobody_listens_on() -> Iterator[str]:
    """An http://127.0.0.1 address whose port is bound but never accepts (refused at once
    once closed): held closed for the block."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    yield f"http://127.0.0.1:{port}"
