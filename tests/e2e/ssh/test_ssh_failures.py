"""SSH failures are clear errors: wrong key, unreachable host, changed or revoked host
key; a known_hosts file as OpenSSH writes it (hashed, several names a line) is honoured.
(A failing bootstrap step and a killed client: test_remote_options.py.)"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import time

import asyncssh
import pytest
from conftest import QUIET, ssh_provider
from hosts import HostLab

import skyward as sky
from skyward.providers.ssh.connection import KnownHosts, connect, parse_host


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


def _hashed(name: str) -> str:
    """``name`` as OpenSSH's HashKnownHosts writes it: |1|base64(salt)|base64(HMAC-SHA1(salt, name))."""
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def test_an_openssh_known_hosts_file_is_honoured(lab: HostLab, tmp_path: os.PathLike[str]) -> None:
    """The host's real key on a hashed line (as ``ssh`` writes with HashKnownHosts) is
    trusted; the same key marked @revoked is refused, and neither is recorded again."""
    host = lab.hosts[0]
    key = asyncssh.read_private_key(os.path.join(host.root, "host_key")).export_public_key().decode().strip()
    known = os.path.join(tmp_path, "known_hosts")
    trusted = f"other.example,[{host.address}]:2222 {key}\n{_hashed(host.address)} {key}\n"
    with open(known, "w") as f:
        f.write(trusted)
    endpoint = parse_host(lab.strings()[0], "root", 22, lab.client_key)

    async def login() -> None:
        conn = await connect(endpoint, KnownHosts(known), 10)
        conn.close()
        await conn.wait_closed()

    asyncio.run(login())
    with open(known) as f:
        assert f.read() == trusted
    with open(known, "a") as f:
        f.write(f"@revoked {_hashed(host.address)} {key}\n")
    provider = ssh_provider(lab, hosts=lab.strings()[:1], known_hosts=known)
    with pytest.raises(ConnectionError, match=r"host key of root@.* was refused \(Host key is revoked.*@revoked"):
        with sky.Compute(provider=provider, nodes=1, options=QUIET):
            pass
