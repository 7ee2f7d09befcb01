"""SSH to the pool's hosts with asyncssh: address parsing, trust-on-first-use host
keys kept in skyward's own known_hosts file, connection errors that say the fix, and
file transfer that works with or without the host's SFTP subsystem."""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
from pathlib import Path

import asyncssh

from skyward.api.paths import skyward_home
from skyward.api.validation import fail
from skyward.providers.base import SSHEndpoint

KEEPALIVE_SECONDS = 5


class HostKeyChangedError(ConnectionError):
    """A host presented a key other than the one recorded for it."""


class HostUnreachableError(ConnectionError):
    """No SSH session could be opened with a host (refused, timed out, no route)."""


def known_hosts_name(endpoint: SSHEndpoint) -> str:
    """How OpenSSH's known_hosts format names ``endpoint``."""
    return endpoint.host if endpoint.port == 22 else f"[{endpoint.host}]:{endpoint.port}"


def parse_host(text: str, user: str, port: int, key_path: str | None = None) -> SSHEndpoint:
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
    return SSHEndpoint(host, int(port_text), user, key_path)


class KnownHosts:
    """skyward's known_hosts file: the first key a host shows is recorded (trust on
    first use); later connections accept only that key."""

    def __init__(self, path: str | None = None) -> None:
        self.path = os.path.expanduser(path) if path else str(skyward_home() / "known_hosts")

    def keys_for(self, address: SSHEndpoint) -> list[str]:
        """Recorded public keys (OpenSSH text) of ``address``."""
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        name = known_hosts_name(address)
        return [" ".join(parts[1:3]) for parts in (line.split() for line in lines) if len(parts) >= 3 and parts[0] == name]

    def record(self, address: SSHEndpoint, key: asyncssh.SSHKey) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        line = f"{known_hosts_name(address)} {key.export_public_key('openssh').decode().strip()}\n"
        with open(self.path, "a") as f:
            f.write(line)


class _TrustOnFirstUse(asyncssh.SSHClient):
    """Accepts and records an unknown host's key; refuses a key that differs."""

    def __init__(self, address: SSHEndpoint, known: KnownHosts) -> None:
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
    address: SSHEndpoint, known: KnownHosts, timeout: float, retry_interval: float | None = None
) -> asyncssh.SSHClientConnection:
    """One SSH connection to ``address``, host key checked against ``known``. Raises
    ConnectionError (unreachable, refused key, changed host key) naming the fix. With
    ``retry_interval`` (``Options.ssh_retry_interval``), an unreachable host is tried
    again every that many seconds until ``timeout`` has passed (a machine still booting)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            return await _connect_once(address, known, max(1.0, left))
        except HostUnreachableError:
            if retry_interval is None or left <= retry_interval:
                raise
            await asyncio.sleep(retry_interval)


async def _connect_once(address: SSHEndpoint, known: KnownHosts, timeout: float) -> asyncssh.SSHClientConnection:
    recorded = known.keys_for(address)
    trusted = asyncssh.import_known_hosts(
        "".join(f"{known_hosts_name(address)} {key}\n" for key in recorded)
    )
    client = _TrustOnFirstUse(address, known)
    key_path = address.key_path
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
                f"was reinstalled, delete the line for {known_hosts_name(address)} from that file"
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
        raise HostUnreachableError(
            f"cannot reach {address} over SSH within {timeout:g}s ({reason}). Check the address "
            "and port, that sshd runs there and a firewall lets you in; raise Options.ssh_timeout "
            "for slow networks"
        ) from None


class RemoteFiles:
    """Files on one host: through SFTP, or through shell commands on the exec channel
    when the host's sshd has no SFTP subsystem. Writes are atomic (a uniquely named
    partial file renamed into place), so hosts that share a home directory can write
    the same file at once."""

    def __init__(self, conn: asyncssh.SSHClientConnection, address: SSHEndpoint) -> None:
        self._conn = conn
        self._address = address
        self._sftp: asyncssh.SFTPClient | None = None
        self._no_sftp = False

    async def makedirs(self, path: str) -> None:
        sftp = await self._client()
        if sftp is not None:
            await sftp.makedirs(path, exist_ok=True)
        else:
            await self._shell(f"mkdir -p -- {shlex.quote(path)}")

    async def sizes(self, directory: str) -> dict[str, int]:
        """Size of each file in ``directory`` by name."""
        sftp = await self._client()
        if sftp is not None:
            return {entry.filename: entry.attrs.size or 0 for entry in await sftp.readdir(directory)}
        listing = await self._shell(
            f"cd -- {shlex.quote(directory)} && for f in * .[!.]*; do [ -f \"$f\" ] && stat -c '%s %n' -- \"$f\"; done; true"
        )
        found = {}
        for line in listing.decode(errors="replace").splitlines():
            size, _, name = line.partition(" ")
            if size.isdigit():
                found[name] = int(size)
        return found

    async def put(self, local: Path, remote: str) -> None:
        """Copy the file ``local`` to ``remote``."""
        partial = _partial(remote)
        sftp = await self._client()
        if sftp is not None:
            await sftp.put(str(local), partial)
            await sftp.posix_rename(partial, remote)
        else:
            await self._shell(_write_command(partial, remote), local.read_bytes())

    async def write(self, data: bytes, remote: str) -> None:
        """Write ``data`` to ``remote``."""
        partial = _partial(remote)
        sftp = await self._client()
        if sftp is not None:
            async with sftp.open(partial, "wb") as f:
                await f.write(data)
            await sftp.posix_rename(partial, remote)
        else:
            await self._shell(_write_command(partial, remote), data)

    async def read(self, remote: str) -> bytes:
        sftp = await self._client()
        if sftp is not None:
            async with sftp.open(remote, "rb") as f:
                return await f.read()  # type: ignore[no-any-return]
        return await self._shell(f"cat -- {shlex.quote(remote)}")

    async def exists(self, remote: str) -> bool:
        sftp = await self._client()
        if sftp is not None:
            return bool(await sftp.exists(remote))
        result = await self._conn.run(f"test -e {shlex.quote(remote)}", check=False)
        return result.exit_status == 0

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.exit()
            self._sftp = None

    async def _client(self) -> asyncssh.SFTPClient | None:
        if self._sftp is None and not self._no_sftp:
            try:
                self._sftp = await self._conn.start_sftp_client()
            except (asyncssh.ChannelOpenError, asyncssh.SFTPError):
                self._no_sftp = True  # no sftp subsystem on this host: use the exec channel
        return self._sftp

    async def _shell(self, command: str, data: bytes | None = None) -> bytes:
        result = await self._conn.run(command, input=data, encoding=None, check=False)
        if result.exit_status != 0:
            error = bytes(result.stderr or b"").decode(errors="replace").strip()
            raise OSError(f"`{command}` failed on {self._address} (exit {result.exit_status}): {error}")
        return bytes(result.stdout or b"")


def _partial(remote: str) -> str:
    head, _, name = remote.rpartition("/")
    return f"{head}/.{name}.{secrets.token_hex(4)}.part" if head else f".{name}.{secrets.token_hex(4)}.part"


def _write_command(partial: str, remote: str) -> str:
    return f"cat > {shlex.quote(partial)} && mv -f -- {shlex.quote(partial)} {shlex.quote(remote)}"
