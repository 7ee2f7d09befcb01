"""``sky.barrier(name, n)``: a synchronization point for ``n`` participants."""

from __future__ import annotations

from skyward.collections.config import check_timeout
from skyward.collections.leases import holder_id
from skyward.collections.operations import Operations, Reduced
from skyward.collections.steps import Steps, async_twin, steps


class SharedBarrier:
    """A distributed, reusable barrier: ``wait(timeout=None)`` and ``reset()``, each with
    an ``_async`` twin. Always strong.

    ``wait`` returns the arrival index (0 for the first to arrive, ``n - 1`` for the
    last), as ``threading.Barrier.wait`` does, once ``n`` participants arrived; the next
    round starts at once. Creating the proxy registers its task (or client thread) as a
    participant: if one dies or its task fails, every waiter gets BrokenBarrierError
    within 3.75 s (``RENEW_EVERY`` + ``LEASE_TTL`` + ``CHECK_EVERY``, see ``config``),
    instead of hanging.
    """

    __slots__ = ("name", "parties", "_operations", "_member")

    def __init__(self, operations: Operations, name: str, parties: int) -> None:
        self.name = name
        self.parties = parties
        self._operations = operations
        self._member: str | None = None

    def _join(self) -> Steps[None]:
        holder = holder_id()
        yield from self._operations.barrier_join(self.name, self.parties, holder)
        self._member = holder

    join = steps(_join)
    join.__doc__ = """Register the calling task (or thread) as a participant: done on creation,
    and by ``wait`` when another task uses this proxy (one sent to tasks, say)."""

    @steps
    def wait(self, timeout: float | None = None) -> Steps[int]:
        """Block until ``n`` participants arrived; returns this arrival's index. Raises
        BrokenBarrierError if the barrier is or becomes broken, or ``timeout`` passes
        (which breaks it for everyone, as with threading.Barrier)."""
        timeout = check_timeout(f"sky.barrier({self.name!r}).wait", timeout)
        if self._member != holder_id():
            yield from self._join()
        return (yield from self._operations.barrier_wait(self.name, self.parties, timeout))

    @steps
    def reset(self) -> Steps[None]:
        """Break the current round (its waiters get BrokenBarrierError) and start afresh;
        also what makes a broken barrier usable again."""
        yield from self._operations.barrier_reset(self.name)

    join_async = async_twin(join)
    wait_async = async_twin(wait)
    reset_async = async_twin(reset)

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, ("barrier", self.name, (self.parties,)))

    def __repr__(self) -> str:
        return f"sky.barrier({self.name!r}, n={self.parties})"
