"""``ViewTracker``: the pool's membership as nodes must see it, and which node has it.

Each membership change publishes a ``MembershipView`` with a higher epoch. A request to
a node carries the current view until that node has answered a request that carried it
(then it has applied it), so a fixed pool never sends one and an elastic pool sends it
once per node per change. A node whose agent was replaced starts over.
"""

from __future__ import annotations

import threading

from skyward.core.instance import MembershipView


class ViewTracker:
    """The current view and the epoch each node acknowledged (thread-safe)."""

    def __init__(self) -> None:
        self._view: MembershipView | None = None
        self._acked: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def current(self) -> MembershipView | None:
        """The latest view (None while the membership never changed)."""
        return self._view

    def publish(self, view: MembershipView) -> None:
        """The membership changed: every node must get ``view``."""
        with self._lock:
            if self._view is None or view.epoch > self._view.epoch:
                self._view = view

    def pending(self, node: int) -> MembershipView | None:
        """The view to send with a request to ``node``, or None if it has it."""
        view = self._view
        if view is None or self._acked.get(node, 0) >= view.epoch:
            return None
        return view

    def acknowledge(self, node: int, view: MembershipView | None) -> None:
        """``node`` answered a request that carried ``view``."""
        if view is None:
            return
        with self._lock:
            self._acked[node] = max(self._acked.get(node, 0), view.epoch)

    def forget(self, node: int) -> None:
        """``node``'s agent was replaced (or the node left): it has no view yet."""
        with self._lock:
            self._acked.pop(node, None)
