"""Inside a host actor: the leases of holders (lock owners, barrier participants).

A holder's process renews its leases every ``RENEW_EVERY`` seconds while it is alive;
a lease not renewed for ``LEASE_TTL`` seconds has expired, and the host then treats the
holder as dead (its locks are freed, its barriers break). With the host checking every
``CHECK_EVERY`` seconds, a dead holder is released at most LEASE_TTL + CHECK_EVERY
seconds after its last renewal.
"""

from __future__ import annotations

import time

LEASE_TTL = 3.0
RENEW_EVERY = 0.5
CHECK_EVERY = 0.25


class LeaseTable:
    """Expiry time per holder."""

    def __init__(self) -> None:
        self._expiry: dict[str, float] = {}

    def grant(self, holder: str) -> None:
        """Start (or extend) ``holder``'s lease."""
        self._expiry[holder] = time.monotonic() + LEASE_TTL

    def renew(self, holders: list[str]) -> list[str]:
        """Extend the leases of ``holders``; returns those that have none (any more)."""
        until = time.monotonic() + LEASE_TTL
        unknown = []
        for holder in holders:
            if holder in self._expiry:
                self._expiry[holder] = until
            else:
                unknown.append(holder)
        return unknown

    def drop(self, holder: str) -> None:
        self._expiry.pop(holder, None)

    def expired(self) -> list[str]:
        """Holders whose lease ran out; they are removed from the table."""
        now = time.monotonic()
        gone = [holder for holder, until in self._expiry.items() if until <= now]
        for holder in gone:
            del self._expiry[holder]
        return gone

    def __len__(self) -> int:
        return len(self._expiry)
