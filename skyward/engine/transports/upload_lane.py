"""The upload lane: a TLS connection from a remote pool's client straight to its head
relay, beside the SSH channel, that carries large payloads (a broadcast's argument).

The SSH channel moves about 250-400 MB/s here (32 KB packets through asyncssh and the
host's sshd); a blocking TLS socket moves 2 GB/s with the same AES-GCM (16 KB records,
encrypted and sent in C). So a payload of ``UPLOAD_FROM`` bytes or more that the client
shares goes over this lane, and the channel then carries only ``ShareUploaded``, naming
it by the ticket it was uploaded under.

Trust: the client makes the relay's key and self-signed certificate for each pool
(``new_credentials``) and sends them with the relay's config over SSH; it trusts that
certificate alone, so only the relay it configured can answer. Then both ends prove the
pool's relay secret (``core.handshake``) before the relay reads any upload, so a stranger
on the port gets nothing stored, and at most ``MAX_UNPROVEN`` connections wait in the
handshake at once. The relay binds its host's address on the pool's network (the one the
client's SSH connection arrived at).

The lane is an optimisation only: the client connects in the background once the relay
listens, and until it is connected, or where it cannot be (a firewall in the way: a
cloud's security group opens SSH alone), or once it broke, ``upload`` returns None and the
payload goes over the SSH channel as before. Nothing ever waits for the lane's connect.

An upload is the 16-byte ticket, the number of parts (4 bytes), each part's length (8
bytes) and the parts' bytes; the relay answers ``STORED`` once it holds them (``Uploads``),
so the ``ShareUploaded`` the client sends after that finds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import mmap
import os
import secrets
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skyward.core import handshake, huge_pages
from skyward.core.accepting import accepted
from skyward.core.codec import EXPANDED_LIMIT, compressible, recv_exactly
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = logging.getLogger("skyward.upload_lane")

UPLOAD_FROM = 4 << 20
"""Payloads of this many bytes or more go over the lane when it is connected."""
TICKET = 16
_HEADER = struct.Struct("!16sI")
_LENGTH = struct.Struct("!Q")
MAX_PARTS = 1 << 16
"""The most parts one upload may have (a pickle and its out-of-band buffers)."""
STORED = b"\x01"
CONNECT_TIMEOUT = 5.0
"""Seconds the client's background connect (TCP, TLS and the secret's proof) may take."""
RECONNECT_AFTER = 30.0
"""Seconds after a connect was tried before a large payload, finding the lane not
connected, has another tried in the background."""
IO_TIMEOUT = 15.0
"""Seconds one send or receive of an upload may block: a link that moves nothing for this
long is given up (the upload then goes over the SSH channel). Between uploads the relay
waits without a limit (the lane stays connected however long the client is idle)."""
MAX_UNPROVEN = 16
"""Connections that may wait in the TLS handshake or the secret's proof at once."""
HANDSHAKE_TIMEOUT = 2 * handshake.TIMEOUT
"""Seconds a connection has for the TLS handshake and the secret's proof together."""
UNCLAIMED_FOR = 600.0
"""Seconds the relay holds an upload that no ``ShareUploaded`` named (longer than a
session waits for its client to resume it)."""
VALID_DAYS = 3650
"""The certificate's validity: it lives as long as its pool (a kept pool may run for months)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """The relay's TLS key and self-signed certificate (PEM), made by the client."""

    certificate: bytes
    key: bytes


def new_credentials() -> Credentials:
    """A fresh P-256 key and a certificate for it, signed by itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "skyward head relay")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)).sign(key, hashes.SHA256())
    )
    return Credentials(
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


Upload = bytes | bytearray | tuple[bytes, Sequence[bytearray | mmap.mmap]]
"""A payload as the relay received it: one part as it came (a pickle with no out-of-band
buffers), or the pickle and its buffers (received into memory backed by huge pages, which
a buffer of 100 MB first touches in 13 ms against 48 ms: ``huge_pages.zeroed``)."""


class Uploads:
    """What arrived over the lane, by ticket, until the session's ``ShareUploaded`` takes
    it, for ``UNCLAIMED_FOR`` seconds at most (the client sends it right after the upload;
    one that never does, an upload cancelled as it ended, is dropped then)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[bytes, tuple[float, Upload]] = {}

    def put(self, ticket: bytes, upload: Upload) -> None:
        now = time.monotonic()
        with self._lock:
            for old in [t for t, (at, _) in self._held.items() if now - at > UNCLAIMED_FOR]:
                del self._held[old]
            self._held[ticket] = now, upload

    def take(self, ticket: bytes) -> Upload | None:
        """The upload under ``ticket``, no longer held; None when there is none."""
        with self._lock:
            held = self._held.pop(ticket, None)
        return None if held is None else held[1]

    def clear(self) -> None:
        """Drop every upload no session took (its client is gone)."""
        with self._lock:
            self._held.clear()


class UploadListener:
    """The relay's end: accepts TLS connections on ``host`` and stores each upload of a
    caller that proved ``secret`` in ``uploads``. OSError when ``host`` cannot be bound."""

    def __init__(self, host: str, credentials: Credentials, secret: bytes, uploads: Uploads) -> None:
        self._secret = secret
        self._uploads = uploads
        self._unproven = threading.BoundedSemaphore(MAX_UNPROVEN)
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.minimum_version = ssl.TLSVersion.TLSv1_3
        with tempfile.TemporaryDirectory(prefix="skyward-tls-") as directory:  # mode 0700: this user only
            chain = os.path.join(directory, "relay.pem")
            with open(os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
                file.write(credentials.key + credentials.certificate)
            self._tls.load_cert_chain(chain)  # read now; the key leaves no file behind
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, 0), family=family, backlog=16)
        self.port: int = self._socket.getsockname()[1]
        threading.Thread(target=self._accept, name="skyward-upload-lane", daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()

    def _accept(self) -> None:
        for connection in accepted(self._socket, log.warning):
            if not self._unproven.acquire(blocking=False):
                connection.close()  # too many strangers at once: they get nothing
                continue
            threading.Thread(target=self._serve, args=(connection,), name="skyward-upload", daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        waiting = True
        deadline: threading.Timer | None = None
        try:
            raw.settimeout(handshake.TIMEOUT)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            with self._tls.wrap_socket(raw, server_side=True, do_handshake_on_connect=False) as connection:
                # the TLS handshake and the proof end within HANDSHAKE_TIMEOUT, however slowly a peer sends
                deadline = threading.Timer(HANDSHAKE_TIMEOUT, _shut, (connection,))
                deadline.start()
                connection.do_handshake()
                proven = handshake.answer_caller(connection, self._secret)
                deadline.cancel()
                waiting = False
                self._unproven.release()
                if not proven:
                    return
                while True:
                    connection.settimeout(None)  # the client's next upload may come any time
                    header = recv_exactly(connection, _HEADER.size)
                    if header is None:
                        return
                    connection.settimeout(IO_TIMEOUT)
                    ticket, count = _HEADER.unpack(header)
                    upload = _receive(connection, count)
                    if upload is None:
                        return
                    self._uploads.put(ticket, upload)
                    connection.sendall(STORED)
        except (OSError, ValueError) as error:
            log.debug("upload lane connection ended: %s", error)
        finally:
            if deadline is not None:
                deadline.cancel()
            if waiting:
                self._unproven.release()
            raw.close()


def _shut(connection: socket.socket) -> None:
    """Wake whatever blocks on ``connection`` (its reads end)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(connection, socket.SHUT_RDWR)


def _receive(connection: socket.socket, count: int) -> Upload | None:
    """The upload of ``count`` parts that follows its header on a proven ``connection``;
    None when the connection ended first. ValueError for no parts, too many, or more
    bytes than the relay takes."""
    lengths = recv_exactly(connection, _LENGTH.size * count) if 0 < count <= MAX_PARTS else None
    if lengths is None:
        raise ValueError(f"an upload of {count} parts, or one cut short")
    sizes = [_LENGTH.unpack_from(lengths, i * _LENGTH.size)[0] for i in range(count)]
    if sum(sizes) > EXPANDED_LIMIT:
        raise ValueError(f"an upload of {sum(sizes)} bytes: more than {EXPANDED_LIMIT}")
    pickled, buffers = bytearray(sizes[0]), [huge_pages.zeroed(size) for size in sizes[1:]]
    for part in (pickled, *buffers):
        view, got = memoryview(part), 0
        while got < len(part):
            n = connection.recv_into(view[got:], min(len(part) - got, 1 << 22))
            if not n:
                return None
            got += n
    return (bytes(pickled), buffers) if buffers else pickled


class UploadLane:
    """The client's end: connects to the relay at ``host``:``port`` in the background
    (``start``), trusting ``certificate`` alone, and uploads over it once connected."""

    def __init__(self, host: str, port: int, certificate: bytes, secret: bytes) -> None:
        self._address = (host, port)
        self._secret = secret
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._tls.minimum_version = ssl.TLSVersion.TLSv1_3
        self._tls.check_hostname = False  # the one certificate trusted is the pool's own
        self._tls.load_verify_locations(cadata=certificate.decode())
        self._connection: ssl.SSLSocket | None = None
        self._lock = threading.Lock()
        """Guards ``_connection`` and ``_closed``."""
        self._sending = threading.Lock()
        """One upload at a time."""
        self._closed = False
        self._connecting = False
        self._tried = -RECONNECT_AFTER
        self.uploaded = 0
        """How many payloads went over the lane."""

    def start(self) -> None:
        """Connect in a thread of its own, unless connected, connecting or closed; nothing
        waits for it."""
        with self._lock:
            if self._connection is not None or self._connecting or self._closed:
                return
            self._connecting, self._tried = True, time.monotonic()
        threading.Thread(target=self._connect, name="skyward-upload-connect", daemon=True).start()

    def _connect(self) -> None:
        connection = None
        try:
            raw = socket.create_connection(self._address, timeout=CONNECT_TIMEOUT)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            try:
                connection = self._tls.wrap_socket(raw)  # owns the socket from here
                if not handshake.prove_to_server(connection, self._secret):
                    raise ConnectionError("the relay did not prove the pool's secret")
            except BaseException:
                (raw if connection is None else connection).close()
                connection = None
                raise
            connection.settimeout(IO_TIMEOUT)
        except (OSError, ssl.SSLError) as error:
            log.debug("no upload lane to %s:%s: %s", *self._address, error)
            connection = None
        finally:
            with self._lock:
                self._connecting = False
                if connection is not None and self._closed:
                    connection.close()
                elif connection is not None:
                    self._connection = connection

    @property
    def connected(self) -> bool:
        return self._connection is not None

    def takes(self, payload: Payload) -> bool:
        """Whether ``payload`` goes over the lane: it is connected, and the payload has
        ``UPLOAD_FROM`` bytes or more and its largest part does not compress (the SSH
        channel sends such a payload compressed, ``codec.relay_frame``: fewer bytes on a
        slow link). Else it goes over the SSH channel; a large one then has the lane
        connect again in the background when ``RECONNECT_AFTER`` seconds passed since it
        was last tried (it broke, or the relay was not reachable then)."""
        if not UPLOAD_FROM <= _size(payload) <= EXPANDED_LIMIT:
            return False
        if self._connection is None:
            if time.monotonic() - self._tried >= RECONNECT_AFTER:
                self.start()
            return False
        parts = _parts(payload)
        return all(memoryview(part).c_contiguous for part in parts) and not compressible(
            max(parts, key=lambda part: memoryview(part).nbytes)
        )

    async def upload(self, payload: Payload) -> bytes | None:
        """``send`` from a thread, where the lane ``takes`` the payload; else None."""
        return await asyncio.to_thread(self.send, payload) if self.takes(payload) else None

    def send(self, payload: Payload) -> bytes | None:
        """``payload`` sent and held by the relay (blocking): the ticket it is held under.
        None when the lane is not connected or broke on the way."""
        with self._sending:
            connection = self._connection
            if connection is None:
                return None
            views = [memoryview(part).cast("B") for part in _parts(payload)]
            ticket = secrets.token_bytes(TICKET)
            try:
                connection.sendall(_HEADER.pack(ticket, len(views)) + b"".join(_LENGTH.pack(v.nbytes) for v in views))
                for view in views:
                    connection.sendall(view)
                if recv_exactly(connection, len(STORED)) != STORED:
                    raise ConnectionError("the relay closed the upload lane")
            except BaseException as error:  # an upload cut short (Ctrl-C too) leaves the stream unusable
                log.debug("the upload lane broke: %s", error)
                with self._lock:
                    if self._connection is connection:
                        self._connection = None
                connection.close()
                if isinstance(error, OSError):
                    return None
                raise
            self.uploaded += 1
            return ticket

    def close(self) -> None:
        """Close the lane; an upload under way ends with None."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            _shut(connection)  # wakes a send under way; TLS's own shutdown would let it send in clear
            if not self._sending.locked():
                connection.close()


def _size(payload: Payload) -> int:
    if isinstance(payload, bytes):
        return len(payload)
    return len(payload[0]) + sum(memoryview(buffer).nbytes for buffer in payload[1])


def _parts(payload: Payload) -> list[ReadableBuffer]:
    return [payload] if isinstance(payload, bytes) else [payload[0], *payload[1]]
