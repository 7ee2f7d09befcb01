"""SSH to the pool's hosts with asyncssh: address parsing, host keys checked against a
known_hosts file in OpenSSH's format (trust on first use for a host it does not know),
connection errors that say the fix, and file transfer that works with or without the
host's SFTP subsystem."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import posixpath
import secrets
import shlex
import weakref
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from skyward.core.paths import skyward_home
from skyward.core.private_dir import open_private
from skyward.core.validation import fail
from skyward.model.nodes import SSHEndpoint
from skyward.providers import registry
from skyward.providers.ssh.asyncssh_import import asyncssh

KEEPALIVE_SECONDS = 5
QUIET_LINK_SECONDS = 15
"""How long a connection outlives a link that answers nothing, unless told otherwise."""
CIPHERS = "^aes256-gcm@openssh.com,aes128-gcm@openssh.com"
"""The ciphers offered first, before asyncssh's defaults (OpenSSH's ``^`` syntax). asyncssh
prefers ChaCha20-Poly1305, which it runs as three calls into ``cryptography`` per packet:
about 22 us a small packet and 160 ms per 100 MB on this machine, against 3-5 us and 35 ms
for AES-GCM, one AES-NI call (docs/benchmarks.md, R-broadcast). Both are AEAD ciphers that
OpenSSH offers by default; a host without AES-GCM still gets the rest of the defaults."""
Listed: TypeAlias = tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]
"""Trusted host keys, trusted certificate authorities, revoked keys (see ``listed``)."""


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


BOOTING_SSH_TIMEOUT = 300.0
"""Seconds a machine created for a pool (still booting) has to answer SSH, where
``Options.ssh_timeout`` is unset."""
BOOTING_RETRY_INTERVAL = 5.0
"""Seconds between tries to reach such a machine, where ``Options.ssh_retry_interval`` is unset."""


@dataclass(frozen=True, slots=True)
class SSHReach:
    """How the client reaches a pool's hosts: host keys checked against ``known``, each
    host given ``timeout`` seconds to answer, one that is unreachable tried again every
    ``retry_interval`` seconds (None: once)."""

    known: KnownHosts
    timeout: float
    retry_interval: float | None = None


class KnownHosts:
    """A known_hosts file in OpenSSH's format, read by asyncssh: hashed names
    (``|1|salt|hash``), several names a line, ``[host]:port``, wildcards,
    ``@cert-authority`` and ``@revoked``. A host the file has no key (nor certificate
    authority) for has the first key it shows recorded (trust on first use); a host it
    has one for must show one of those keys, or a certificate of one of those
    authorities; a key marked ``@revoked`` is always refused. Lines are matched as
    OpenSSH matches them (see ``listed``)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = os.path.expanduser(path) if path else str(skyward_home() / "known_hosts")

    @classmethod
    def for_pool(cls, pool_id: str, held: ExitStack) -> KnownHosts:
        """The file for the hosts of one pool (machines created for it), in the pool's
        directory (``registry.files_of``), which is removed with everything in it when
        ``held`` closes."""
        registry.files_of(pool_id)
        held.callback(registry.remove_files, pool_id)
        return cls(str(registry.known_hosts_of(pool_id)))

    def entries(self) -> asyncssh.SSHKnownHosts:
        """What the file says now (nothing when it does not exist). ValueError naming the
        file when a line is not in OpenSSH's format."""
        try:
            return asyncssh.read_known_hosts(self.path)
        except FileNotFoundError:
            return asyncssh.import_known_hosts("")
        except ValueError as exc:
            raise ValueError(
                f"the known_hosts file {self.path} has a line that is not in OpenSSH's format ({exc}): "
                "fix or delete that line, or pass another file with SSH(known_hosts=...)"
            ) from None

    def record(self, address: SSHEndpoint, key: asyncssh.SSHKey) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        line = f"{known_hosts_name(address)} {key.export_public_key('openssh').decode().strip()}\n"
        with os.fdopen(open_private(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a") as f:
            f.write(line)


def listed(entries: asyncssh.SSHKnownHosts, host: str, addr: str, port: int | None) -> Listed:
    """The keys ``entries`` trust, the certificate authorities they trust and the keys
    they revoke for the host called ``host`` at address ``addr`` ("" when unknown) and
    ``port`` (None: 22). As in OpenSSH, a port other than 22 matches only names written
    ``[host]:port`` (asyncssh's own match falls back to the names without a port when
    none trusts anything for that port, dropping the port's ``@revoked`` lines)."""
    if port in (None, 22):
        trusted, authorities, revoked, *_ = entries.match(host, addr, None)
        return list(trusted), list(authorities), list(revoked)
    found: Listed = ([], [], [])
    for name in dict.fromkeys(name for name in (host, addr) if name):
        for into, keys in zip(found, entries.match(f"[{name}]:{port}", "", None)[:3]):
            into.extend(keys)
    return found


class _TrustOnFirstUse(asyncssh.SSHClient):
    """Asked by asyncssh about a key ``lookup`` neither trusts nor revokes: records and
    accepts it for a host ``lookup`` knows nothing of; refuses it for a host it knows."""

    def __init__(self, address: SSHEndpoint, known: KnownHosts, lookup: Callable[[str, str, int], Listed]) -> None:
        self._address = address
        self._known = known
        self._lookup = lookup
        self.changed = False
        self.silent = False
        """Whether the connection ended because the host answered none of its keepalives."""

    def connection_lost(self, exc: Exception | None) -> None:
        # asyncssh says why only in the message of a ConnectionLost
        self.silent = isinstance(exc, asyncssh.ConnectionLost) and "keepalive" in str(exc)

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        trusted, authorities, _ = self._lookup(host, addr, port)
        if trusted or authorities:
            self.changed = True
            return False
        self._known.record(self._address, key)
        return True


async def connect(
    address: SSHEndpoint, known: KnownHosts, timeout: float, retry_interval: float | None = None,
    quiet_link: float = QUIET_LINK_SECONDS,
) -> asyncssh.SSHClientConnection:
    """One SSH connection to ``address``, host key checked against ``known``. Raises
    ConnectionError (unreachable, refused key, changed host key) naming the fix. With
    ``retry_interval`` (``Options.ssh_retry_interval``), an unreachable host is tried
    again every that many seconds until ``timeout`` has passed (a machine still booting).
    Once open, the connection ends when the host has answered none of its keepalives
    (one every ``KEEPALIVE_SECONDS``) for ``quiet_link`` seconds; until then TCP resends
    what a dropped link held back."""
    deadline = asyncio.get_running_loop().time() + timeout
    keepalives = max(3, math.ceil(quiet_link / KEEPALIVE_SECONDS))
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            return await _connect_once(address, known, timeout, max(1.0, left), keepalives)
        except HostUnreachableError:
            if retry_interval is None or left <= retry_interval:
                raise
            await asyncio.sleep(retry_interval)


_clients: weakref.WeakKeyDictionary[asyncssh.SSHClientConnection, _TrustOnFirstUse] = weakref.WeakKeyDictionary()
"""The client object of each connection ``connect`` made (asyncssh forgets it once the
connection ends)."""


def went_silent(conn: asyncssh.SSHClientConnection) -> bool:
    """Whether ``conn`` (made by ``connect``) ended because its host answered none of its
    keepalives for the ``quiet_link`` it was opened with, rather than being closed or
    reset."""
    client = _clients.get(conn)
    return client is not None and client.silent


async def _connect_once(
    address: SSHEndpoint, known: KnownHosts, timeout: float, limit: float, keepalives: int
) -> asyncssh.SSHClientConnection:
    """One attempt of ``connect``, waiting at most ``limit`` seconds (what is left of
    ``timeout``, which its errors name)."""
    lookup = functools.partial(listed, known.entries())
    client = _TrustOnFirstUse(address, known, lookup)
    key_path = address.key_path
    keys = [os.path.expanduser(key_path)] if key_path else ()
    try:
        conn = await asyncio.wait_for(
            asyncssh.connect(
                address.host,
                port=address.port,
                username=address.user,
                client_keys=keys or (),
                known_hosts=lookup,
                client_factory=lambda: client,
                agent_path=None if key_path else (),
                connect_timeout=limit,
                login_timeout=limit,
                keepalive_interval=KEEPALIVE_SECONDS,
                keepalive_count_max=keepalives,
                encryption_algs=CIPHERS,
                config=None,
            ),
            limit + 1,
        )
        _clients[conn] = client
        return conn
    except asyncssh.HostKeyNotVerifiable as exc:
        if client.changed:
            raise _changed(address, known) from None
        raise ConnectionError(
            f"the host key of {address} was refused ({exc}) under {known.path}: refusing to connect. "
            "A key marked @revoked there is never accepted, and a host certificate is accepted only "
            "from an authority listed there with @cert-authority"
        ) from None
    except asyncssh.PermissionDenied:
        which = f"the key {key_path}" if key_path else "your default SSH keys (~/.ssh/id_*, ssh-agent)"
        raise ConnectionError(
            f"SSH login to {address} was refused: {which} is not accepted for user "
            f"{address.user!r}. Add the public key to the host's ~/.ssh/authorized_keys, or pass "
            "SSH(key_path=...)/SSH(user=...)"
        ) from None
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
        if isinstance(exc, asyncssh.KeyExchangeFailed) and any(lookup(address.host, "", address.port)[:2]):
            raise _changed(address, known) from None  # it offers no key of the types recorded for it
        reason = "timed out" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise HostUnreachableError(
            f"cannot reach {address} over SSH within {timeout:g}s ({reason}). Check the address "
            "and port, that sshd runs there and a firewall lets you in; raise Options.ssh_timeout "
            "for slow networks"
        ) from None


def _changed(address: SSHEndpoint, known: KnownHosts) -> HostKeyChangedError:
    name = known_hosts_name(address)
    return HostKeyChangedError(
        f"the host key of {address} changed: {known.path} holds other keys (or certificate "
        "authorities) for it; refusing to connect (this is what a man-in-the-middle looks like). "
        f"If the host was reinstalled, delete its lines from that file: ssh-keygen -R '{name}' -f "
        f"{known.path} (hashed lines included)"
    )


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

    async def make_private_dirs(
        self, paths: Sequence[str], new: Sequence[str] = (), then: str = "", args: Sequence[str] = (),
        timeout: float | None = None,
    ) -> str:
        """Create each directory of ``paths`` and ``new`` (and its parents) with mode 0700,
        or set 0700 on one of ``paths`` that exists: only the login user may list or enter
        them. Then run the bash script ``then`` with ``args`` and return what it printed:
        all in one command, as each costs the host a login shell's start. OSError when one
        directory is a link or not the login user's own (someone else made it first), or
        one of ``new`` exists at all (what is there belongs to something else: a pool's
        own directory is never shared), and then nothing after it is made or run; OSError
        too when ``then`` exits non-zero; asyncssh's TimeoutError after ``timeout`` seconds."""
        steps = [_private_dir(path, False) for path in paths] + [_private_dir(path, True) for path in new]
        script = f"( {' && '.join(steps)} ) || exit {_DIRS_REFUSED}\n{then}"
        command = " ".join(["bash", "-s", "--", *(shlex.quote(arg) for arg in args)])
        result = await self._conn.run(command, input=script.encode(), encoding=None, check=False, timeout=timeout)
        said = _bytes(result.stderr).decode(errors="replace").strip()
        if result.exit_status == _DIRS_REFUSED:
            raise OSError(f"making the directories {', '.join([*paths, *new])} failed on {self._address}: {said}")
        if result.exit_status != 0:
            raise OSError(f"a script run after making directories failed on {self._address} (exit {result.exit_status}): {said}")
        return _bytes(result.stdout).decode(errors="replace")

    async def sizes(self, directory: str) -> dict[str, int]:
        """Size of each file in ``directory`` by name."""
        sftp = await self._client()
        if sftp is not None:
            return {os.fsdecode(entry.filename): entry.attrs.size or 0 for entry in await sftp.readdir(directory)}
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
                return await f.read()
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
        """``command``'s output; OSError naming the command, the host and what it printed
        on stderr when it fails."""
        result = await self._conn.run(command, input=data, encoding=None, check=False)
        if result.exit_status != 0:
            error = _bytes(result.stderr).decode(errors="replace").strip()
            raise OSError(f"`{command}` failed on {self._address} (exit {result.exit_status}): {error}")
        return _bytes(result.stdout)


_DIRS_REFUSED = 97
"""The exit status of ``make_private_dirs``'s command when it refuses a directory."""


def _private_dir(path: str, new: bool) -> str:
    """A shell step that makes ``path`` as ``RemoteFiles.make_private_dirs`` says, or fails
    saying why on stderr."""
    q = shlex.quote(path)
    first = ""
    if new:
        taken = shlex.quote(
            f"{path} exists already on this host, and a pool's directory is its own: another pool "
            "with this pool's id runs here, or ran and left it behind"
        )
        parent = shlex.quote(posixpath.dirname(path.rstrip("/")) or "/")
        first = f"mkdir -p -- {parent} && {{ mkdir -m 700 -- {q} 2>/dev/null || {{ echo {taken} >&2; exit 1; }}; }} && "
    refused = shlex.quote(
        f"{path} must be a directory of this user's own, mode 0700, and is not (a link, or "
        "another user's): remove it (as its owner), then open the pool again"
    )
    return (
        f"{{ {first}mkdir -p -m 700 -- {q} && [ -d {q} ] && [ ! -L {q} ] && [ -O {q} ] && chmod 700 -- {q} "
        f"|| {{ echo {refused} >&2; exit 1; }}; }}"
    )


def _partial(remote: str) -> str:
    head, _, name = remote.rpartition("/")
    return f"{head}/.{name}.{secrets.token_hex(4)}.part" if head else f".{name}.{secrets.token_hex(4)}.part"


def _write_command(partial: str, remote: str) -> str:
    return f"cat > {shlex.quote(partial)} && mv -f -- {shlex.quote(partial)} {shlex.quote(remote)}"


def _bytes(output: bytes | str | None) -> bytes:
    """A command's output as bytes (asyncssh gives bytes when no encoding is set)."""
    if output is None:
        return b""
    return output if isinstance(output, bytes) else output.encode()
