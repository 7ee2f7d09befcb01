"""SSH failures are clear errors: wrong key, unreachable host, changed host key. (A
failing bootstrap step and a killed client: test_remote_options.py.)"""

from __future__ import annotations

import os
import time

import asyncssh
import pytest
from conftest import QUIET, ssh_provider
from hosts import HostLab

import skyward as sky


def test_wrong_key_is_a_clear_auth_error(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    other = os.path.join(tmp_path, "other_key")
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(other)
    provider = ssh_provider(lab, hosts=lab.strings()[:1], key_path=other)
    with pytest.raises(ConnectionError, match="refused.*other_key.*authorized_keys"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass


def test_unreachable_host_fails_within_the_ssh_timeout(lab: HostLab) -> None:
    nowhere = lab.hosts[0].address.rsplit(".", 1)[0] + ".200"  # in the lab's subnet, no host
    provider = ssh_provider(lab, hosts=[f"root@{nowhere}:22"])
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"cannot reach root@{nowhere}:22 over SSH within 3s"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET.with_(ssh_timeout=3)):
            pass
    assert time.monotonic() - started < 10


def test_changed_host_key_is_refused(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    known = os.path.join(tmp_path, "known_hosts")
    impostor = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    with open(known, "w") as f:
        f.write(f"{lab.hosts[0].address} {impostor}\n")
    provider = ssh_provider(lab, hosts=lab.strings()[:1], known_hosts=known)
    with pytest.raises(ConnectionError, match="host key of root@.* changed.*refusing"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass


def test_first_connection_records_the_host_key(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    known = os.path.join(tmp_path, "known_hosts")
    key = os.path.join(tmp_path, "k")
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(key)
    provider = ssh_provider(lab, hosts=lab.strings()[:1], known_hosts=known, key_path=key)
    with pytest.raises(ConnectionError):  # the key is refused, but the host key was seen
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass
    with open(known) as f:
        assert f.read().startswith(f"{lab.hosts[0].address} ssh-ed25519 ")
