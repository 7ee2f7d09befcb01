"""``Members``: who is in the pool, by rank, and what each node's ``InstanceInfo`` says
about the others.

Ranks are dense (``0..n-1``) and stable: a node that joins takes the next rank, the
pool shrinks from the highest rank, and a replacement takes the rank of the node it
replaces (which keeps counting in ``total_nodes`` while it is being replaced).
"""

from __future__ import annotations

import threading

from msgspec import Struct

from skyward.core.instance import InstanceInfo, MembershipView, PeerInfo
from skyward.model.nodes import NodeHandle


class Member(Struct, frozen=True):
    """One rank's node: its provider handle and its own ``InstanceInfo``."""

    handle: NodeHandle
    info: InstanceInfo

    @property
    def peer(self) -> PeerInfo:
        """How the others reach it."""
        for peer in self.info.peers:
            if peer.node == self.info.node:
                return peer
        return PeerInfo(self.info.node, self.handle.address)


class Members:
    """The rank table (thread-safe); every change makes a new ``view``."""

    def __init__(self, handles: tuple[NodeHandle, ...], infos: tuple[InstanceInfo, ...]) -> None:
        self._members = {info.node: Member(handle, info) for handle, info in zip(handles, infos)}
        self._epoch = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, node: object) -> bool:
        return node in self._members

    def ranks(self) -> list[int]:
        with self._lock:
            return sorted(self._members)

    def get(self, node: int) -> Member | None:
        return self._members.get(node)

    def handles(self) -> list[NodeHandle]:
        """The nodes' handles in rank order (what the pool pays for)."""
        with self._lock:
            return [self._members[node].handle for node in sorted(self._members)]

    def join(self, node: int, handle: NodeHandle, info: InstanceInfo) -> MembershipView:
        """Node ``node`` joined (or its replacement did); the new view."""
        with self._lock:
            self._members[node] = Member(handle, info)
            return self._view()

    def leave(self, node: int) -> MembershipView:
        """Node ``node`` left for good; the new view."""
        with self._lock:
            self._members.pop(node, None)
            return self._view()

    def next_rank(self, taken: set[int]) -> int:
        """The lowest rank that is neither a member nor in ``taken`` (joining)."""
        with self._lock:
            rank = 0
            while rank in self._members or rank in taken:
                rank += 1
            return rank

    def _view(self) -> MembershipView:
        self._epoch += 1
        members = [self._members[node] for node in sorted(self._members)]
        return MembershipView(
            self._epoch,
            len(members),
            tuple(member.peer for member in members),
            sum(member.info.accelerators for member in members),
        )
