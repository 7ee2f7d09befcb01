"""Host keys are checked against a known_hosts file as OpenSSH writes it: hashed names,
several names a line, ``[host]:port``, ``@cert-authority`` and ``@revoked``. Each test
connects (``skyward.providers.ssh.connection.connect``) to a real asyncssh server on
127.0.0.1 with a freshly generated host key."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import socket
from pathlib import Path

import asyncssh
import pytest

from skyward.model.nodes import SSHEndpoint
from skyward.providers.ssh.connection import HostKeyChangedError, KnownHosts, connect


class _NoAuth(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return False


def public(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


def other_key() -> str:
    return public(asyncssh.generate_private_key("ssh-ed25519"))


def hashed(name: str) -> str:
    """``name`` as OpenSSH's HashKnownHosts writes it: |1|base64(salt)|base64(HMAC-SHA1(salt, name))."""
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


class Host:
    """An SSH server on 127.0.0.1 (no login needed) with a fresh host key, and the
    known_hosts file the client checks it against."""

    def __init__(self, tmp_path: Path) -> None:
        self.key = asyncssh.generate_private_key("ssh-ed25519")
        self.public = public(self.key)
        self.known = tmp_path / "known_hosts"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.name = f"[127.0.0.1]:{self.port}"
        """How known_hosts names this host (a port other than 22)."""

    def connect(self, lines: list[str] | None, certificate: asyncssh.SSHCertificate | None = None) -> None:
        """Write ``lines`` as the known_hosts file (None: leave it as it is) and connect
        once, the server showing its key (or ``certificate`` of it); raises what the
        connection raised."""
        if lines is not None:
            self.known.write_text("".join(line + "\n" for line in lines))

        async def run() -> None:
            shown = (self.key, certificate) if certificate else self.key
            server = await asyncssh.create_server(_NoAuth, "127.0.0.1", self.port, server_host_keys=[shown])
            try:
                conn = await connect(SSHEndpoint("127.0.0.1", self.port, "tester"), KnownHosts(str(self.known)), 10)
                conn.close()
                await conn.wait_closed()
            finally:
                server.close()
                await server.wait_closed()

        asyncio.run(run())


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def test_a_hashed_line_with_the_hosts_key_is_trusted(host: Host) -> None:
    lines = ["# a comment", f"{hashed('elsewhere.example')} {other_key()}", f"{hashed(host.name)} {host.public}"]
    host.connect(lines)
    assert host.known.read_text().splitlines() == lines, "a trusted key is not recorded again"


def test_several_names_on_one_line_are_matched(host: Host) -> None:
    lines = [f"other.example,{host.name},[third.example]:2222 {host.public} me@laptop"]
    host.connect(lines)
    assert host.known.read_text().splitlines() == lines


def test_a_hashed_line_with_another_key_is_a_changed_key(host: Host) -> None:
    with pytest.raises(HostKeyChangedError, match=r"host key of tester@127\.0\.0\.1:\d+ changed.*ssh-keygen -R"):
        host.connect([f"{hashed(host.name)} {other_key()}"])
    assert host.public not in host.known.read_text()


@pytest.mark.parametrize("also_trusted", [False, True])
def test_a_revoked_key_is_refused_and_never_recorded(host: Host, also_trusted: bool) -> None:
    lines = [f"{host.name} {host.public}"] * also_trusted + [f"@revoked {hashed(host.name)} {host.public}"]
    with pytest.raises(ConnectionError, match=r"host key of tester@127\.0\.0\.1:\d+ was refused \(Host key is revoked"):
        host.connect(lines)
    assert host.known.read_text().splitlines() == lines


def test_a_certificate_of_a_listed_authority_is_trusted_and_others_are_refused(host: Host) -> None:
    authority, stranger = (asyncssh.generate_private_key("ssh-ed25519") for _ in range(2))
    listed = [f"@cert-authority {host.name} {public(authority)}"]
    host.connect(listed, authority.generate_host_certificate(host.key, "host", principals=["127.0.0.1"]))
    with pytest.raises(ConnectionError, match=r"was refused \(Host CA key is not trusted.*@cert-authority"):
        host.connect(listed, stranger.generate_host_certificate(host.key, "host", principals=["127.0.0.1"]))
    with pytest.raises(HostKeyChangedError, match="changed"):  # a plain key where only an authority is listed
        host.connect(listed)
    assert host.known.read_text().splitlines() == listed


def test_an_unknown_host_is_recorded_on_first_use_then_trusted(host: Host) -> None:
    lines = [f"{hashed('elsewhere.example')} {other_key()}", f"@revoked {host.name} {other_key()}"]
    host.connect(lines)
    assert host.known.read_text().splitlines() == [*lines, f"{host.name} {host.public}"]
    host.connect(None)
    assert host.known.read_text().splitlines() == [*lines, f"{host.name} {host.public}"]


def test_a_missing_file_is_created_with_the_first_key(host: Host) -> None:
    host.connect(None)
    assert host.known.read_text() == f"{host.name} {host.public}\n"


def test_a_line_not_in_openssh_format_names_the_file(host: Host) -> None:
    with pytest.raises(ValueError, match=rf"known_hosts file {host.known} has a line that is not in OpenSSH's format"):
        host.connect([f"@trusted {host.name} {host.public}"])


def test_a_name_without_a_port_covers_port_22_only(host: Host) -> None:
    lines = [f"127.0.0.1 {other_key()}", f"@revoked 127.0.0.1 {host.public}"]
    host.connect(lines)  # as in OpenSSH: these lines are about port 22, this host is on another
    assert host.known.read_text().splitlines() == [*lines, f"{host.name} {host.public}"]
