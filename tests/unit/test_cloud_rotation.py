"""The CI rotation of the clouds' expensive tests (tests/e2e/cloud/rotation.py): AWS and
two others per commit, chosen by the commit's day, any 7 consecutive days covering every
cloud whatever the history or the clone's depth; ``SKYWARD_CLOUDS`` forces a set; outside
CI every cloud runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from e2e.cloud import rotation
from e2e.cloud.clouds import CLOUDS


def test_each_commit_runs_aws_and_two_others_and_any_7_consecutive_days_run_every_cloud() -> None:
    assert rotation.turns(CLOUDS) <= 7
    for first in (0, 5, 184, 20_600):
        picks = [rotation.pick(CLOUDS, day) for day in range(first, first + 7)]
        assert all(pick[0] == "aws" and len(pick) == 1 + rotation.ROTATING for pick in picks)
        assert set().union(*picks) == set(CLOUDS), f"days {first}..{first + 6} leave a cloud out"


def test_a_cloud_appended_to_the_list_joins_the_rotation() -> None:
    grown = (*CLOUDS, "newcloud")
    assert "newcloud" in set().union(*(rotation.pick(grown, day) for day in range(rotation.turns(grown))))


def test_the_day_comes_from_the_commit_alone_so_a_shallow_clone_picks_the_same(tmp_path: Path) -> None:
    root = Path(rotation.__file__).resolve().parents[3]
    full = rotation.day_of(str(root))
    assert full is not None and full == rotation.commit_day(), "this checkout is a git checkout"
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(shallow)], check=True, timeout=120)
    assert rotation.day_of(str(shallow)) == full
    assert rotation.day_of(str(tmp_path)) is None  # not a checkout


def test_outside_ci_every_cloud_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    assert rotation.chosen() is None and rotation.skip_reason("vultr") is None
    assert rotation.describe() == "cloud pools: every cloud"


def test_in_ci_the_commit_picks_the_clouds_and_the_rest_are_skipped_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    day = rotation.commit_day()
    assert day is not None, "this checkout is a git checkout"
    run = rotation.chosen()
    assert run == rotation.pick(CLOUDS, day)
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


def test_a_single_cloud_test_runs_on_the_days_clouds_but_aws_and_in_turn_on_every_cloud(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("SKYWARD_CLOUDS", raising=False)
    covered: set[str] = set()
    for day in range(7):
        monkeypatch.setattr(rotation, "commit_day", lambda day=day: day)
        running = [name for name in CLOUDS if rotation.skip_reason(name, single=True) is None]
        assert len(running) == rotation.ROTATING and "aws" not in running
        covered.update(running)
    assert covered == set(CLOUDS) - {"aws"}
    monkeypatch.setenv("SKYWARD_CLOUDS", "aws,vultr,lambda")
    assert [name for name in CLOUDS if rotation.skip_reason(name, single=True) is None] == ["vultr"]
    monkeypatch.delenv("SKYWARD_CLOUDS")
    monkeypatch.delenv("CI")
    assert all(rotation.skip_reason(name, single=True) is None for name in CLOUDS), "outside CI: every cloud"
