"""Mutual proof of a shared secret, before a channel's first frame is read.

Both ends of a channel (the client and the head relay of a remote pool; the relay and a
node agent's TCP lane) know a 32-byte secret that never crosses the network. Each sends
a fresh nonce; each answers with HMAC-SHA256(secret, role + both nonces), the server
first. Neither reads a frame, let alone unpickles one, before the other end proved the
secret; a proof is bound to both nonces, so a recorded exchange replays nowhere, and the
role tag keeps the server's proof from being reflected back as the caller's.

The blocking ``prove_to_server``/``answer_caller`` serve sockets; ``prove_to_server_async``
and ``answer_caller_async`` the same exchange on asyncio streams. Each returns False (and
never raises for a peer's misbehaviour) when the peer did not prove the secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import socket
from typing import Protocol

from skyward.core.codec import recv_exactly

NONCE = 16
PROOF = 32
SECRET_BYTES = 32
TIMEOUT = 5.0
"""Seconds either end waits for the other's part of the exchange."""


def new_secret() -> bytes:
    """A fresh channel secret."""
    return secrets.token_bytes(SECRET_BYTES)


def proof(secret: bytes, role: bytes, *nonces: bytes) -> bytes:
    return hmac.new(secret, role + b"".join(nonces), hashlib.sha256).digest()


def _server_proof(secret: bytes, caller_nonce: bytes, server_nonce: bytes) -> bytes:
    return proof(secret, b"agent", caller_nonce, server_nonce)


def _caller_proof(secret: bytes, caller_nonce: bytes, server_nonce: bytes) -> bytes:
    return proof(secret, b"caller", server_nonce, caller_nonce)


def prove_to_server(connection: socket.socket, secret: bytes) -> bool:
    """The caller's side, on a blocking socket: True when the server proved the secret
    (and was given the caller's proof). OSError when the connection fails."""
    mine = secrets.token_bytes(NONCE)
    connection.settimeout(TIMEOUT)
    connection.sendall(mine)
    answer = recv_exactly(connection, NONCE + PROOF)
    if answer is None:
        return False
    theirs, shown = answer[:NONCE], answer[NONCE:]
    if not hmac.compare_digest(shown, _server_proof(secret, mine, theirs)):
        return False
    connection.sendall(_caller_proof(secret, mine, theirs))
    return True


def answer_caller(connection: socket.socket, secret: bytes) -> bool:
    """The server's side, on a blocking socket: True when the caller proved the secret."""
    connection.settimeout(TIMEOUT)
    try:
        theirs = recv_exactly(connection, NONCE)
        if theirs is None:
            return False
        mine = secrets.token_bytes(NONCE)
        connection.sendall(mine + _server_proof(secret, theirs, mine))
        shown = recv_exactly(connection, PROOF)
    except OSError:
        return False
    if shown is None or not hmac.compare_digest(shown, _caller_proof(secret, theirs, mine)):
        return False
    connection.settimeout(None)
    return True


class StreamIn(Protocol):
    """What a message is read from: an asyncio stream, or an SSH channel's."""

    async def readexactly(self, n: int) -> bytes: ...

    async def read(self, n: int = -1) -> bytes: ...


class StreamOut(Protocol):
    """What a message is written to: an asyncio stream, or an SSH channel's."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


async def prove_to_server_async(reader: StreamIn, writer: StreamOut, secret: bytes) -> bool:
    """The caller's side on asyncio streams (bounded by ``TIMEOUT``)."""
    mine = secrets.token_bytes(NONCE)
    try:
        writer.write(mine)
        await writer.drain()
        answer = await asyncio.wait_for(reader.readexactly(NONCE + PROOF), TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
        return False
    theirs, shown = answer[:NONCE], answer[NONCE:]
    if not hmac.compare_digest(shown, _server_proof(secret, mine, theirs)):
        return False
    try:
        writer.write(_caller_proof(secret, mine, theirs))
        await writer.drain()
    except OSError:
        return False
    return True


async def answer_caller_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, secret: bytes) -> bool:
    """The server's side on asyncio streams (bounded by ``TIMEOUT``)."""
    try:
        theirs = await asyncio.wait_for(reader.readexactly(NONCE), TIMEOUT)
        mine = secrets.token_bytes(NONCE)
        writer.write(mine + _server_proof(secret, theirs, mine))
        await writer.drain()
        shown = await asyncio.wait_for(reader.readexactly(PROOF), TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
        return False
    return hmac.compare_digest(shown, _caller_proof(secret, theirs, mine))
