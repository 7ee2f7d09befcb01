"""A client's side of kept pools (``Options(keep_alive=seconds)``): adopt the kept pool
this script's pool is defined as (or is named), else have the pool daemon open one and
keep it; either way the client reaches it through the daemon's relay for it, as it
reaches a remote pool's head relay, so it never starts or joins Ray itself.

Adopting needs an equal definition (``fingerprint``): the provider's class and (but for
``sky.Local``) its settings, every other Spec field (nodes, Image, plugins, volumes, ...), the
worker, whether collections are on, and the client's working directory, interpreter
and skyward version (the agents import from there). Everything else of Options may
differ between scripts (timeouts, console, logging); ``keep_alive`` stays the first
script's until the pool ends.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

import cloudpickle

from skyward.core.codec import load_payload
from skyward.core.instance import InstanceInfo
from skyward.core.version import VERSION
from skyward.engine.membership import Floor, Joined, Loss
from skyward.engine.transports.relay import RelayEndpoint, RelayTransport, RemoteAgent
from skyward.engine.wire import ByValueEncoder
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Options, Spec
from skyward.providers import daemon_client
from skyward.providers.base import LaunchedCluster, PhaseTiming, runs_here
from skyward.providers.kept.request import ClientContext, KeptRequest
from skyward.providers.local.provider import local_handle
from skyward.providers.relay_collections import RelayCollections
from skyward.providers.ssh.loop import LoopThread

DEFAULT_READY_TIMEOUT = 120.0
DEFAULT_REMOTE_TIMEOUT = 1800.0
"""How long a remote kept pool may take to open (machines, bootstrap) without ``Options.provision_timeout``."""


def fingerprint(spec: Spec, options: Options, context: ClientContext) -> str:
    """What a pool's definition must equal for a later script to adopt it (see the module)."""
    definition = (
        type(spec.provider).__qualname__,
        "" if runs_here(spec.provider) else repr(spec.provider),  # keep_warm does not matter
        sorted((name, repr(value)) for name, value in spec.non_defaults().items()),
        repr(options.resolved_worker),
        options.collections_enabled,
        context.cwd,
        os.path.realpath(sys.executable),
        VERSION,
    )
    return hashlib.sha256(repr(definition).encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Kept:
    """A pool the pool daemon holds (``Options(keep_alive=...)``), wrapping its Spec's
    provider: ``launch`` adopts the kept pool ``name`` (when ``named``; else any idle one
    defined the same) or has the daemon open and keep one (``open_kept``, which says
    what it raises). ``as_defined``: adopt ``name`` whatever its definition, open nothing."""

    name: str
    named: bool = False
    as_defined: bool = False
    daemon_held: ClassVar[bool] = True

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        return open_kept(spec, options, self.name, self.named, self.as_defined)


def open_kept(spec: Spec, options: Options, name: str, named: bool, as_defined: bool = False) -> LaunchedCluster:
    """The kept pool for ``spec``: the one named ``name`` when ``named`` (else any idle
    one defined the same), adopted; else a new one named ``name`` that the daemon keeps
    ``options.keep_alive`` seconds after its last client left (with an id of its own:
    it outlives this client's pool). RuntimeError naming the holder when the pool is in
    use by another script, or the difference when the pool of that name is defined
    otherwise. ``as_defined``: adopt the pool ``name`` whatever its definition (the
    script asked for it by name alone, ``sky run NAME``, ``sky attach NAME``), and open
    nothing: LookupError when it is not kept."""
    assert options.keep_alive is not None
    started = time.monotonic()
    context = ClientContext.here()
    spec = _absolute_includes(spec, context.cwd)
    mark = fingerprint(spec, options, context)
    held = daemon_client.adopt_pool(name if named else "", "" if as_defined else mark)
    if held is None and as_defined:
        raise LookupError(f"no pool named {name!r} is kept now (sky ls lists the kept pools)")
    if held is None:
        def request() -> bytes:  # a pool id of its own each time it is sent
            return cloudpickle.dumps(KeptRequest(spec, options, uuid.uuid4().hex, context))

        timeout = float(options.provision_timeout or default_timeout(spec))
        held = daemon_client.keep_pool(name, mark, options.keep_alive, request, timeout)
    infos: tuple[InstanceInfo, ...] = load_payload(held.infos)  # from this user's daemon (peer checked)
    loop = LoopThread(f"skyward-kept-{held.name}")
    socket_path = held.socket
    where = f"the kept pool {held.name} ({socket_path})"
    transport = RelayTransport(RelayEndpoint.on_unix_socket(socket_path, held.secret, where), loop.loop)
    encoder = ByValueEncoder(spec.image.includes)
    collections = RelayCollections(transport, encoder, options.collections_enabled)
    nodes: tuple[NodeHandle, ...] = load_payload(held.nodes)
    phase = PhaseTiming("adopted" if held.adopted else "kept", time.monotonic() - started)
    ready = float(options.provision_timeout or default_timeout(spec))
    membership = KeptMembership(transport, held.pool_id, infos[0], ready)
    return LaunchedCluster(
        nodes, infos, transport, encoder, collections, loop.stop, (phase,), membership, kept=phase.name,
    )


def default_timeout(spec: Spec) -> float:
    """How long a pool of ``spec`` may take to open, or to add a node, without
    ``Options.provision_timeout``."""
    return DEFAULT_READY_TIMEOUT if runs_here(spec.provider) else DEFAULT_REMOTE_TIMEOUT


class KeptMembership:
    """How a script grows and shrinks the kept pool it holds: the pool daemon adds and
    removes the nodes (over the relay's Attach and Detach: a local pool's agents placed
    as its first ones, ``LocalKeptPool.start_agent``/``stop_agent``; a remote pool's hosts by its
    host process, through its own membership, ``PoolHost.add_node``/``remove_node``), so they are the pool's and stay
    when the script leaves. Node 0 never leaves: the relay serves the collections through
    it. ``first`` is node 0's InstanceInfo (a local node's, but for its rank; a remote
    node's comes from the daemon; the engine sends the membership with its first task)."""

    def __init__(self, transport: RelayTransport, pool_id: str, first: InstanceInfo, ready_timeout: float) -> None:
        self._transport = transport
        self._pool_id = pool_id
        self._first = first
        self._ready_timeout = ready_timeout

    def capacity(self) -> int | None:
        return None

    def lowest(self) -> Floor:
        """1: node 0 serves the pool's collections."""
        return Floor(1, "node 0 of a kept pool serves its collections and never leaves; resize to min=1 or more")

    def add(self, node: int) -> Joined:
        """RuntimeError naming the node and the daemon's reason when its agent does not start."""
        joined = self._transport.join(node, RemoteAgent(0, None, self._ready_timeout))
        if not joined:  # a local node, placed as the first ones
            return Joined(local_handle(self._pool_id, node), replace(self._first, node=node))
        handle, info = load_payload(joined)  # from this user's daemon (peer checked, secret proven)
        return Joined(handle, info)

    def remove(self, node: int) -> None:
        self._transport.detach(node, f"node {node} was removed from the pool")

    def watch(self, lost: Callable[[Loss], None]) -> None:
        """``lost`` for each host of a remote pool the daemon reports lost (``Lost``: it
        watches them); a local pool's dead agent is restarted in place by Ray."""
        self._transport.watch_losses(lost)

    def check(self) -> list[Loss]:
        return []


def _absolute_includes(spec: Spec, cwd: str) -> Spec:
    """``spec`` with ``Image.includes`` made absolute (the daemon works elsewhere)."""
    includes = tuple(os.path.abspath(os.path.join(cwd, path)) for path in spec.image.includes)
    return replace(spec, image=replace(spec.image, includes=includes))
