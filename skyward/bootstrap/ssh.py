"""SSH to the pool's hosts with asyncssh: address parsing, trust-on-first-use host
keys kept in skyward's own known_hosts file, and connection errors that say the fix."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import asyncssh

from skyward.validation import fail

DEFAULT_KNOWN_HOSTS = "~/.skyward/known_hosts"
KEEPALIVE_SECONDS = 5


class HostKeyChangedError(ConnectionError):
    """A host presented a key other than the one recorded for it."""


@dataclass(frozen=True, slots=True)
class HostAddress:
    """Who to log in as, where."""

    user: str
    host: str
    port: int = 22

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """How OpenSSH's known_hosts format names this host."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def parse_host(text: str, user: str, port: int) -> HostAddress:
    """``host``, ``user@host``, ``host:port`` or ``user@host:port``; missing parts default."""
    if not isinstance(text, str) or not text.strip():
        raise fail("SSH", "hosts", text, 'each host is a string like "10.0.0.5" or "root@10.0.0.5:22"')
    rest = text.strip()
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port_text = tail.removeprefix(":") or str(port)
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        host, port_text = rest, str(port)
    if not host or not user or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise fail("SSH", "hosts", text, 'use "host", "user@host" or "user@host:port" (port 1-65535)')
    return HostAddress(user, host, int(port_text))


class KnownHosts:
    """skyward's known_hosts file: the first key a host shows is recorded (trust on
    first use); later connections accept only that key."""

    def __init__(self, path: str | None = None) -> None:
        self.path = os.path.expanduser(path or DEFAULT_KNOWN_HOSTS)

    def keys_for(self, address: HostAddress) -> list[str]:
        """Recorded public keys (OpenSSH text) of ``address``."""
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        name = address.known_hosts_name
        return [" ".join(parts[1:3]) for parts in (line.split() for line in lines) if len(parts) >= 3 and parts[0] == name]

    def record(self, address: HostAddress, key: asyncssh.SSHKey) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        line = f"{address.known_hosts_name} {key.export_public_key('openssh').decode().strip()}\n"
        with open(self.path, "a") as f:
            f.write(line)


class _TrustOnFirstUse(asyncssh.SSHClient):
    """Accepts and records an unknown host's key; refuses a key that differs."""

    def __init__(self, address: HostAddress, known: KnownHosts) -> None:
        self._address = address
        self._known = known
        self.changed = False

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        if self._known.keys_for(self._address):
            self.changed = True
            return False
        self._known.record(self._address, key)
        return True


async def connect(
    address: HostAddress, key_path: str | None, known: KnownHosts, timeout: float
) -> asyncssh.SSHClientConnection:
    """One SSH connection to ``address``, host key checked against ``known``. Raises
    ConnectionError (unreachable, refused key, changed host key) naming the fix."""
    recorded = known.keys_for(address)
    trusted = asyncssh.import_known_hosts(
        "".join(f"{address.known_hosts_name} {key}\n" for key in recorded)
    )
    client = _TrustOnFirstUse(address, known)
    keys = [os.path.expanduser(key_path)] if key_path else ()
    try:
        return await asyncio.wait_for(
            asyncssh.connect(
                address.host,
                port=address.port,
                username=address.user,
                client_keys=keys or (),
                known_hosts=trusted,
                client_factory=lambda: client,
                agent_path=None if key_path else (),
                connect_timeout=timeout,
                login_timeout=timeout,
                keepalive_interval=KEEPALIVE_SECONDS,
                keepalive_count_max=3,
                config=None,
            ),
            timeout + 1,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        if client.changed:
            raise HostKeyChangedError(
                f"the host key of {address} changed since it was first recorded in {known.path}: "
                "refusing to connect (this is what a man-in-the-middle looks like). If the host "
                f"was reinstalled, delete the line for {address.known_hosts_name} from that file"
            ) from None
        raise ConnectionError(f"the host key of {address} could not be verified: {exc}") from None
    except asyncssh.PermissionDenied:
        which = f"the key {key_path}" if key_path else "your default SSH keys (~/.ssh/id_*, ssh-agent)"
        raise ConnectionError(
            f"SSH login to {address} was refused: {which} is not accepted for user "
            f"{address.user!r}. Add the public key to the host's ~/.ssh/authorized_keys, or pass "
            "SSH(key_path=...)/SSH(user=...)"
        ) from None
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise ConnectionError(
            f"cannot reach {address} over SSH within {timeout:g}s ({reason}). Check the address "
            "and port, that sshd runs there and a firewall lets you in; raise Options.ssh_timeout "
            "for slow networks"
        ) from None
