"""What the pool daemon writes down for a successor (``providers.kept.state``): read back
as written, and not read at all from a file or directory another user could have
written or can read."""

from __future__ import annotations

import os
import time
from pathlib import Path

from skyward.providers.kept import state
from skyward.providers.local.detached_ray import DetachedRay

RAY = DetachedRay("127.0.0.1:1234", "ab" * 32, "/tmp/sky-x")
RECORD = state.KeptRecord("exp", "f" * 24, 600.0, "9" * 32, 2, 1_700_000_000.5, b"\x80\x05pickled")


def private(tmp_path: Path) -> Path:
    directory = tmp_path / "daemon"
    directory.mkdir(mode=0o700)
    return directory


def test_what_is_saved_is_loaded_back(tmp_path: Path) -> None:
    directory = private(tmp_path)
    state.save(directory, state.DaemonState(RAY, (RECORD,)))
    assert os.stat(directory / state.STATE_FILE).st_mode & 0o777 == 0o600
    assert state.load(directory) == state.DaemonState(RAY, (RECORD,))
    state.forget(directory)
    assert state.load(directory) is None


def test_a_file_others_can_read_or_a_directory_others_can_write_is_not_read(tmp_path: Path) -> None:
    directory = private(tmp_path)
    state.save(directory, state.DaemonState(RAY, (RECORD,)))
    os.chmod(directory / state.STATE_FILE, 0o644)
    assert state.load(directory) is None
    os.chmod(directory / state.STATE_FILE, 0o600)
    os.chmod(directory, 0o777)
    assert state.load(directory) is None


def test_a_malformed_file_is_nothing_to_adopt(tmp_path: Path) -> None:
    directory = private(tmp_path)
    descriptor = os.open(directory / state.STATE_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(descriptor, b'{"ray": {"address": 1}}')
    os.close(descriptor)
    assert state.load(directory) is None


def test_pools_whose_ray_instance_is_gone_are_forgotten(tmp_path: Path) -> None:
    directory = private(tmp_path)
    gone = DetachedRay("127.0.0.1:1", "cd" * 32, str(tmp_path / "no-such-instance"))
    state.save(directory, state.DaemonState(gone, (RECORD,)))
    assert state.kept_by_a_dead_daemon(directory) is False
    assert not (directory / state.STATE_FILE).exists()


def test_remote_pools_outlive_the_ray_instance_and_survive_a_round_trip(tmp_path: Path) -> None:
    """A remote pool's handover is kept when the daemon's Ray instance is gone (a reboot):
    its hosts may still run it, so a new daemon is started to take it over."""
    directory = private(tmp_path)
    gone = DetachedRay("127.0.0.1:1", "cd" * 32, str(tmp_path / "no-such-instance"))
    remote = state.KeptRecord("far", "e" * 24, 60.0, "8" * 32, 3, 1_700_000_001.0, b"definition", b"handover")
    state.save(directory, state.DaemonState(gone, (RECORD, remote)))
    assert state.load(directory) == state.DaemonState(gone, (RECORD, remote))
    assert state.kept_by_a_dead_daemon(directory) is True
    assert state.DaemonState(gone, (RECORD, remote)).without_ray() == state.DaemonState(None, (remote,))
    state.save(directory, state.DaemonState(None, (remote,)))
    assert state.load(directory) == state.DaemonState(None, (remote,))


def test_how_long_a_daemon_has_been_silent(tmp_path: Path) -> None:
    directory = private(tmp_path)
    assert state.silent_for(directory) == float("inf")
    state.mark_alive(directory)
    assert state.silent_for(directory) < 5
    then = time.time() - 700
    os.utime(directory / state.ALIVE_FILE, (then, then))
    assert 699 < state.silent_for(directory) < 710
