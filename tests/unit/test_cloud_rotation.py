"""The CI rotation of the clouds' expensive tests (tests/e2e/cloud/rotation.py): AWS and
two others per commit, consecutive commits covering every cloud; ``SKYWARD_CLOUDS``
forces a set; outside CI every cloud runs."""

from __future__ import annotations

import math

import pytest
from e2e.cloud import rotation
from e2e.cloud.clouds import CLOUDS


def test_each_commit_runs_aws_and_two_others_and_consecutive_commits_run_every_cloud() -> None:
    others = len(CLOUDS) - 1
    turns = math.ceil(others / rotation.ROTATING)
    for first in (0, 5, 184):
        picks = [rotation.pick(CLOUDS, number) for number in range(first, first + turns)]
        assert all(pick[0] == "aws" and len(pick) == 1 + rotation.ROTATING for pick in picks)
        assert set().union(*picks) == set(CLOUDS), f"commits {first}..{first + turns - 1} leave a cloud out"


def test_a_cloud_appended_to_the_list_joins_the_rotation() -> None:
    grown = (*CLOUDS, "newcloud")
    turns = math.ceil((len(grown) - 1) / rotation.ROTATING)
    assert "newcloud" in set().union(*(rotation.pick(grown, number) for number in range(turns)))


def test_outside_ci_every_cloud_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    assert rotation.chosen() is None and rotation.skip_reason("vultr") is None
    assert rotation.describe() == "cloud pools: every cloud"


def test_in_ci_the_commit_picks_the_clouds_and_the_rest_are_skipped_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    number = rotation.commit_number()
    assert number is not None, "this checkout is a git checkout"
    run = rotation.chosen()
    assert run == rotation.pick(CLOUDS, number)
    out = next(name for name in CLOUDS if name not in run)
    assert rotation.skip_reason(out) == f"{out} rotated out this commit (CI); SKYWARD_CLOUDS=all runs it"
    assert rotation.skip_reason("aws") is None
    assert ", ".join(run) in rotation.describe()


def test_skyward_clouds_forces_the_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("SKYWARD_CLOUDS", "all")
    assert rotation.chosen() is None
    monkeypatch.setenv("SKYWARD_CLOUDS", "vultr, lambda")
    assert rotation.chosen() == ("vultr", "lambda")
    assert rotation.skip_reason("aws") == "aws not in SKYWARD_CLOUDS; SKYWARD_CLOUDS=all runs it"
    monkeypatch.setenv("SKYWARD_CLOUDS", "vultr,nimbus")
    with pytest.raises(pytest.UsageError, match="nimbus"):
        rotation.chosen()


def test_a_single_cloud_test_runs_on_one_cloud_a_commit_and_in_turn_on_every_cloud(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    covered: set[str] = set()
    for number in range(len(CLOUDS) * 2):
        monkeypatch.setattr(rotation, "commit_number", lambda number=number: number)
        running = [name for name in CLOUDS if rotation.skip_reason(name, single=True) is None]
        assert len(running) == 1 and running[0] != "aws"
        covered.update(running)
    assert covered == set(CLOUDS) - {"aws"}
    monkeypatch.setenv("SKYWARD_CLOUDS", "aws,vultr,lambda")
    assert [name for name in CLOUDS if rotation.skip_reason(name, single=True) is None] == ["vultr"]
    monkeypatch.delenv("SKYWARD_CLOUDS")
    monkeypatch.delenv("CI")
    assert all(rotation.skip_reason(name, single=True) is None for name in CLOUDS), "outside CI: every cloud"
