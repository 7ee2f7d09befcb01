"""Directories at names anyone can guess (the MPS plugin's ``/tmp/skyward-mps-<job>-<node>``,
a stream's stop requests under ``/tmp/skyward-streams-<uid>``): ``private_directory``
makes them 0700 and refuses one that another user could control, and a stop request in
a directory others could write is ignored. No GPU needed: the helpers are tested directly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from skyward.core.private_dir import private_directory


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_directory_is_made_0700_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        private_directory(str(tmp_path / "mps"))
    finally:
        os.umask(previous)
    assert (tmp_path / "mps").is_dir() and mode(tmp_path / "mps") == 0o700


def test_an_existing_directory_of_this_user_is_kept_and_narrowed_to_0700(tmp_path: Path) -> None:
    existing = tmp_path / "mps"
    existing.mkdir()
    os.chmod(existing, 0o755)
    (existing / "log").mkdir()
    private_directory(str(existing))
    assert mode(existing) == 0o700 and (existing / "log").is_dir()


def test_a_symlink_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "planted"
    target.mkdir()
    os.chmod(target, 0o755)
    link = tmp_path / "mps"
    link.symlink_to(target)
    with pytest.raises(PermissionError) as caught:
        private_directory(str(link))
    message = str(caught.value)
    assert message.startswith(f"{link} is a symlink, not a directory (owner ")
    assert "mode lrwxrwxrwx 0777" in message and f"`rm -rf {link}`" in message
    assert mode(target) == 0o755


def test_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mps").write_text("")
    with pytest.raises(PermissionError, match=r"mps is not a directory \(owner .*mode -rw"):
        private_directory(str(tmp_path / "mps"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """What another user would do first: make the guessable directory, 0700, their own."""
    planted = tmp_path / "mps"
    planted.mkdir(mode=0o700)
    os.chown(planted, 65534, 65534)
    with pytest.raises(PermissionError) as caught:
        private_directory(str(planted))
    message = str(caught.value)
    assert message.startswith(f"{planted} belongs to another user, not to ")
    assert "uid 65534)" in message and "mode drwx------ 0700" in message
    assert "as its owner or root" in message
    assert os.lstat(planted).st_uid == 65534 and mode(planted) == 0o700


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777, 0o1777])
def test_a_directory_that_group_or_others_can_write_is_refused(tmp_path: Path, bits: int) -> None:
    shared = tmp_path / "mps"
    shared.mkdir()
    os.chmod(shared, bits)
    with pytest.raises(PermissionError) as caught:
        private_directory(str(shared))
    message = str(caught.value)
    assert message.startswith(f"{shared} is writable by its group or others (owner ")
    assert f"{stat.filemode(stat.S_IFDIR | bits)} {bits:04o}" in message
    assert mode(shared) == bits


def test_a_stop_request_in_a_directory_another_user_could_write_is_ignored(tmp_path: Path) -> None:
    from skyward.engine import stream_stop

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    planted = shared / "abc123"
    planted.touch()
    assert not stream_stop.requested(planted)
    shared.chmod(0o700)
    assert stream_stop.requested(planted)


def test_skyward_home_is_made_private_and_an_existing_0755_one_narrowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyward.core.paths import skyward_dir, skyward_home

    home = tmp_path / "deep" / "home"
    monkeypatch.setenv("SKYWARD_HOME", str(home))
    assert skyward_home() == home and mode(home) == 0o700
    os.chmod(home, 0o755)
    (home / "logs").mkdir(mode=0o755)
    os.chmod(home / "logs", 0o755)
    assert skyward_dir("logs") == home / "logs"
    assert mode(home) == 0o700 and mode(home / "logs") == 0o700


def test_skyward_home_of_another_user_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skyward.core.paths import skyward_home

    if os.geteuid() != 0:
        pytest.skip("runs as root: it gives the directory to another user")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.chown(home, 65534, 65534)
    monkeypatch.setenv("SKYWARD_HOME", str(home))
    with pytest.raises(PermissionError, match=f"{home} belongs to another user"):
        skyward_home()


def test_a_private_file_is_0600_from_its_creation_and_never_replaces_a_planted_one(tmp_path: Path) -> None:
    from skyward.core.private_dir import create_private_file, open_private

    previous = os.umask(0)
    try:
        create_private_file(str(tmp_path / "key.pem"), b"secret")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "key.pem") == 0o600 and (tmp_path / "key.pem").read_bytes() == b"secret"
    (tmp_path / "planted").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        create_private_file(str(tmp_path / "planted"), b"secret")
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "old.log").write_text("x")
    os.chmod(tmp_path / "old.log", 0o644)
    os.close(open_private(str(tmp_path / "old.log"), os.O_WRONLY | os.O_APPEND))
    assert mode(tmp_path / "old.log") == 0o600


def test_a_link_of_this_user_in_skyward_home_to_a_private_directory_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skyward.core.paths import skyward_dir

    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / "home"))
    elsewhere = tmp_path / "bigger-disk"
    elsewhere.mkdir(mode=0o755)
    os.chmod(elsewhere, 0o755)
    (tmp_path / "home").mkdir(mode=0o700)
    (tmp_path / "home" / "wheels").symlink_to(elsewhere)
    assert skyward_dir("wheels") == tmp_path / "home" / "wheels"
    assert (tmp_path / "home" / "wheels").is_symlink() and mode(elsewhere) == 0o700
