"""The client's collections of a pool behind a relay (a remote pool's head relay, or a
kept pool's relay in the pool daemon): every operation is sent through the relay to the
head node's agent, which serves it."""

from __future__ import annotations

import concurrent.futures

from skyward.collections.config import DISABLED
from skyward.collections.gateway import ForwardingOperations, decode_answer, encode_operation, fresh_read
from skyward.engine.transports.relay import RelayTransport
from skyward.engine.wire import ByValueEncoder


class RelayCollections:
    """The client's collections of a remote pool: every operation is sent through the
    relay to the head node's agent."""

    def __init__(self, transport: RelayTransport, encoder: ByValueEncoder, enabled: bool) -> None:
        self._transport = transport
        self._encoder = encoder
        self._enabled = enabled
        self._operations = ForwardingOperations(self._forward, "the head node")

    def operations(self) -> ForwardingOperations:
        """The pool's operations, one object for the pool's life (a lock's holds are
        recorded by it: ``SharedLock.token``)."""
        if not self._enabled:
            raise RuntimeError(DISABLED)
        return self._operations

    def release(self) -> None:
        """Nothing here: the head relay frees what this client held when it disconnects."""

    def results_arrived(self) -> None:
        """Nothing cached here: this client's eventual reads ask the owner (``_forward``)."""

    def membership_changed(self, left: int | None, reason: str) -> None:
        """The pool's nodes changed: the head node's agent tells the collection hosts."""
        if self._enabled:
            from skyward.collections.steps import run

            run(self.operations().pool_membership_changed(left, reason))

    def _forward(self, op: str, args: tuple[object, ...]) -> concurrent.futures.Future[object]:
        """Send ``op(*args)`` to the head node's agent. An eventual read asks the owner
        (``fresh``), not the head node's cache: this client is one network hop from every
        owner anyway, and a task's writes, applied before its result came, must show."""
        args = fresh_read(op, args)
        answer = self._transport.collection_call(encode_operation(op, args, self._encoder.dumps))
        result: concurrent.futures.Future[object] = concurrent.futures.Future()

        def done(future: concurrent.futures.Future[bytes]) -> None:
            try:
                result.set_result(decode_answer(future.result()))
            except BaseException as exc:  # the operation's own error, or the connection's
                result.set_exception(exc)

        answer.add_done_callback(done)
        return result
