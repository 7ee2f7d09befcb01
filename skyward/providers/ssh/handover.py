"""What a remote kept pool's holder knows of it, for another process to take it over
after the holder died (``launch.take_over``).

The pool daemon holds its remote kept pools over its own SSH connections: when it dies
(SIGKILL, a reboot of this machine) those close, and each node's watchdog counts
``Spec.ttl`` down before it stops the pool there. What the daemon knew of such a pool
that the hosts do not tell is its ``Handover``, which the daemon writes down
(``kept.state``); its successor ``take_over``s the pool from it before the countdown
ends: it connects to the same hosts (their keys checked against the same known_hosts),
rejoins each node's watchdog (``watchdog.REJOIN``), which stops the countdown, and
reaches the head relay, which serves a kept pool's next client once it proves the
pool's secret. Ray, the agents, the collections' contents and the volumes' mounts are
the hosts' and carry on untouched.

A pool taken over closes as it would have: its processes stopped on every host, its
record and files on this machine removed (the cloud's SSH key, its known_hosts:
``registry.files_of``), then what it holds in its cloud removed and confirmed gone (its
``Holdings``, or what the tags and names every cloud gives a pool find, ``leftovers``).
A pool that cannot be taken over (a host or its watchdog is gone, the relay does not
answer) is closed so at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from skyward.core.instance import InstanceInfo
from skyward.model.nodes import NodeHandle
from skyward.providers import registry
from skyward.providers.base import Holdings
from skyward.providers.leftovers import remove_leftovers
from skyward.providers.ssh.bootstrap import Bootstrapped
from skyward.providers.ssh.cluster import HostFacts


@dataclass(frozen=True, slots=True)
class HostState:
    """One host of the pool as its client knew it."""

    index: int
    serial: int
    handle: NodeHandle
    pool_dir: str
    facts: HostFacts
    ready: Bootstrapped


@dataclass(frozen=True, slots=True)
class Handover:
    """What ``take_over`` needs of a remote pool (see the module). It holds the pool's
    Ray token and relay secret: whoever has it can run code on the pool's hosts, so it
    is kept only in the daemon's private state file."""

    pool_id: str
    provider: str
    region: str | None
    hosts: tuple[HostState, ...]
    infos: tuple[InstanceInfo, ...]
    known_hosts: str
    ttl: int
    ray_token: str
    gcs_port: int
    halt: bool
    volume_count: int
    relay_port: int
    relay_secret: bytes
    compress: bool
    holdings: Holdings | None = None
    """What it holds at its provider, kept while the pool lives and released with it
    (None: found by the tags and names every cloud gives a pool, ``leftovers``)."""


def release(handover: Handover) -> None:
    """Remove the pool's record and files on this machine (``registry.forget``), then what
    it holds in its cloud, confirmed (``TeardownError`` naming what is not)."""
    registry.forget(handover.pool_id)  # a live record would keep its cloud resources from removal
    if handover.holdings is not None:
        handover.holdings.release()
    else:
        remove_leftovers(handover.provider, handover.region, handover.pool_id)
