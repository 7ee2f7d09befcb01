"""The registry of pools on this machine: a pool's private directory of files, and what
``forget`` and ``forget_dead`` remove (sky down, sky gc, the pool daemon)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from skyward.providers import registry

DEAD = "d" * 32
LIVE = "a" * 32


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path))
    return tmp_path


def register_and_exit(pool_id: str, home: Path) -> None:
    """A record (and a file in the pool's directory) left by a process that is gone."""
    code = (
        "import sys; from skyward.providers import registry; "
        "registry.register(sys.argv[1], 'aws', 'us-east-1'); "
        "(registry.files_of(sys.argv[1]) / 'known_hosts').write_text('')"
    )
    subprocess.run(
        [sys.executable, "-c", code, pool_id], env={**os.environ, "SKYWARD_HOME": str(home)}, check=True, timeout=60
    )


def test_a_pools_directory_is_private_and_removed_with_its_files(home: Path) -> None:
    files = registry.files_of(LIVE)
    assert files == home / "pools" / LIVE
    assert stat.S_IMODE(files.stat().st_mode) == 0o700
    (files / "key.pem").write_text("secret")
    assert registry.files_of(LIVE) == files and (files / "key.pem").exists(), "made once, kept"
    registry.remove_files(LIVE)
    assert not (home / "pools").exists(), "the emptied records' directory goes too"


def test_forget_removes_a_pools_record_and_files(home: Path) -> None:
    register_and_exit(DEAD, home)
    assert [record.pool_id for record in registry.records()] == [DEAD]
    registry.forget(DEAD)
    assert not (home / "pools").exists()


def test_forget_dead_takes_a_pool_by_the_start_of_its_id_and_never_a_live_one(home: Path) -> None:
    register_and_exit(DEAD, home)
    registry.register(LIVE, "aws", "us-east-1")
    (registry.files_of(LIVE) / "known_hosts").write_text("")
    registry.forget_dead(["", DEAD[:12], LIVE[:12]])  # "" (a name without a pool) matches nothing
    assert [record.pool_id for record in registry.records()] == [LIVE]
    assert not (home / "pools" / DEAD).exists() and (home / "pools" / LIVE / "known_hosts").exists()
    registry.forget(LIVE)


def test_the_cost_so_far_counts_from_when_the_nodes_came_up_through_a_take_over(home: Path) -> None:
    registry.register(LIVE, "aws", "us-east-1")  # the provider, before its nodes
    node = registry.NodeRecord("i-1", "10.0.0.1", "g5.xlarge", hourly_price=3600.0)
    registry.register(LIVE, "aws", "us-east-1", nodes=[node])  # the nodes up: the bill starts
    (record,) = registry.records()
    registry.register(LIVE, "aws", "us-east-1", keep_alive=600)  # the pool daemon takes it over
    (taken,) = registry.records()
    assert taken.opened == record.opened and taken.keep_alive == 600
    assert taken.cost_so_far(record.opened + 10) == pytest.approx(10.0)


def test_listing_the_pools_while_the_last_one_closes_never_fails(home: Path) -> None:
    """The last pool's close removes the emptied records' directory; ``sky ls`` or
    ``sky down`` listing the pools at that moment sees none, not FileNotFoundError."""
    code = (
        "import sys, time; from skyward.providers import registry; end = time.monotonic() + 3\n"
        "while time.monotonic() < end:\n"
        "    registry.register(sys.argv[1], 'local', None); registry.unregister(sys.argv[1])\n"
    )
    closing = subprocess.Popen(
        [sys.executable, "-c", code, LIVE], env={**os.environ, "SKYWARD_HOME": str(home)}
    )
    try:
        listings = 0
        while closing.poll() is None:
            assert all(record.pool_id == LIVE for record in registry.records())
            listings += 1
        assert closing.returncode == 0 and listings > 100
    finally:
        closing.kill()
        closing.wait(timeout=10)
