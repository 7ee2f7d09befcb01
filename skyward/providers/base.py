"""The contract between a pool and its providers.

A provider checks a Spec against what it can give (``validate``, before anything is
started), prices it (``offers``), and turns it into a running ``LaunchedCluster`` (``launch``):
typed node handles, one transport to their agents, the nodes' ``InstanceInfo``, how the
client reaches the pool's collections, and ``stop``, which confirms that everything it
started is gone (or raises ``TeardownError`` naming what is left).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from msgspec import Struct

from skyward.collections.operations import Operations
from skyward.core.errors import SkywardError
from skyward.core.instance import InstanceInfo
from skyward.core.validation import fail
from skyward.engine.driver import Encoder
from skyward.engine.membership import Membership
from skyward.engine.transport import Transport
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Options, Spec
from skyward.observe.cost import Pricing

if TYPE_CHECKING:
    from skyward.storage.client import Storage


class TeardownError(SkywardError, RuntimeError):
    """A provider could not confirm that something it started is gone; the message names it."""


@dataclass(frozen=True, slots=True)
class Offer:
    """A priced kind of machine a provider can launch for a Spec."""

    provider: str
    instance_type: str
    vcpus: float
    memory_gb: float
    hourly_price: float
    spot: bool
    region: str | None = None
    accelerator: str | None = None
    accelerator_count: float = 0.0
    accelerator_memory_gb: float | None = None
    architecture: str = "x86_64"
    ondemand_price: float | None = None
    price_source: str = "live"
    """Where ``hourly_price`` comes from: ``"live"`` (the provider's API now), or
    ``"snapshot YYYY-MM-DD"`` (a dated snapshot shipped with skyward, used when the
    provider's price API cannot be read)."""


class PriceSnapshotWarning(UserWarning):
    """A provider's prices come from the dated snapshot shipped with skyward, not its live
    price API (which could not be read; the message says why and the snapshot's date)."""


class PhaseTiming(Struct, frozen=True):
    """How long one phase of bringing the nodes up took (``node`` None: all of them)."""

    name: str
    seconds: float
    node: int | None = None


class ClientCollections(Protocol):
    """How the client reaches the pool's distributed collections."""

    def operations(self) -> Operations:
        """The client's collection operations (RuntimeError with ``Options(cluster=False)``)."""

    def membership_changed(self, left: int | None, reason: str) -> None:
        """The pool's nodes changed (``left``: the rank of a node that left or was lost,
        None when one joined): the node's locks are freed and the barriers it joined
        break naming ``reason``; barriers between rounds may be sized anew. Blocking."""

    def release(self) -> None:
        """The pool closes: stop what the client runs for its collections."""

    def results_arrived(self) -> None:
        """A task's result came back to the client (the task's eventual writes are applied,
        its node saw to that): the client's next eventual read of a slot must see them."""


class Holdings(Protocol):
    """What a pool holds at its provider, as a process that took the pool over from one
    that died keeps and releases it (``ssh.handover``); picklable."""

    def keep(self) -> None:
        """Keep it while the pool lives (AWS: renew its expiry tag)."""

    def release(self) -> None:
        """Remove it, confirmed; ``TeardownError`` naming what is not."""


class LaunchedCluster(Struct, eq=False):
    """A running pool's nodes, as a provider hands them over."""

    nodes: tuple[NodeHandle, ...]
    infos: tuple[InstanceInfo, ...]
    transport: Transport[Any]
    encode: Encoder
    collections: ClientCollections
    stop: Callable[[], None]
    """Stop everything the provider started for the pool; raises ``TeardownError`` when
    something could not be confirmed gone."""
    phases: tuple[PhaseTiming, ...] = ()
    membership: Membership | None = None
    """How nodes are added and removed while the pool runs (None: a fixed cluster)."""
    handover: Callable[[tuple[NodeHandle, ...]], bytes] | None = None
    """A kept remote pool with the given member nodes (those that have fully joined), as
    another process takes it over if this one dies: a pickled ``ssh.handover.Handover``
    (None: it cannot be)."""
    kept: str = ""
    """"kept": the pool daemon opened this pool and keeps it; "adopted": a kept pool taken
    up again; "": the pool is this process's own."""

    @property
    def pricing(self) -> Pricing:
        """What the nodes cost per hour, and what they would cost on demand."""
        return pricing(self.nodes)

    def end(self) -> None:
        """Release the pool's collections, then stop everything the provider started,
        also when the release failed: nothing is left running for want of it. Raises
        what ``stop`` raised (``TeardownError``), else what the release raised."""
        try:
            self.collections.release()
        finally:
            self.stop()


def pricing(nodes: Iterable[NodeHandle]) -> Pricing:
    """What ``nodes`` cost per hour, and what they would cost on demand."""
    nodes = list(nodes)
    rate = sum(node.hourly_price for node in nodes)
    ondemand = sum(node.ondemand_price if node.ondemand_price is not None else node.hourly_price for node in nodes)
    spot = sum(1 for node in nodes if node.spot)
    return Pricing(rate, ondemand, spot_count=spot, ondemand_count=len(nodes) - spot)


@runtime_checkable
class Provider(Protocol):
    """What every provider (``sky.Local()``, ``sky.SSH(...)``, ``sky.Ray(...)``, clouds) implements."""

    name: ClassVar[str]
    options_used: ClassVar[frozenset[str]]
    """The provider-specific ``Options`` fields it honours (see ``api.option_checks``)."""
    priced: ClassVar[bool]
    """Whether it sells machines: then no offer for a Spec means it cannot be had."""
    resizable: ClassVar[bool]
    """Whether its clusters have a ``Membership`` (elastic ``Nodes``, ``pool.resize``,
    node replacement, health checks); a provider without this attribute has not."""
    local_processes: ClassVar[bool]
    """Whether its nodes are processes of this machine that share its files (``sky.Local()``):
    their mounts and keys stay here, and the pool daemon starts its kept pools on its own
    Ray instead of launching them; a provider without this attribute's are not
    (``runs_here``)."""

    def validate(self, spec: Spec, options: Options) -> None:
        """Raise ValueError (naming the field, the value and the fix) for what this
        provider cannot honour, before anything is started."""

    def offers(self, spec: Spec) -> list[Offer]:
        """The priced machines that satisfy ``spec``, cheapest first (empty: unpriced)."""

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Start ``spec``'s nodes and their agents (``spec.node_count.floor`` of them for
        a resizable provider, which adds the rest through ``LaunchedCluster.membership``, else
        ``desired``), with ``spec.volumes`` mounted on every node (each with its storage
        filled in by ``with_default_storage``); blocks until every agent answers."""

    def default_storage(self, spec: Spec) -> Storage | None:
        """The storage a ``Volume(storage=None)`` of ``spec`` uses (a cloud's own object
        store in the Spec's region), or None when this provider has none."""


class Launcher(Protocol):
    """How a pool has its cluster: launched by its Spec's provider in this process
    (``Direct``), or held by the pool daemon (``providers.kept.client.Kept``). Chosen once
    when the pool opens, so opening has no branch of its own for kept pools."""

    daemon_held: ClassVar[bool]
    """Whether the pool daemon holds the cluster (and lists it): then this process does
    not record it in the registry of open pools."""

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """``spec``'s cluster, as ``Provider.launch`` gives it."""


class Direct(Struct, frozen=True):
    """The Spec's provider launches the cluster in this process; it ends with the pool."""

    daemon_held: ClassVar[bool] = False

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        return spec.provider.launch(spec, options, pool_id)


@runtime_checkable
class SnapshotPriced(Protocol):
    """A cloud that prices offers from the snapshot shipped with skyward alone, with no
    credentials and no network (``sky.offers()`` on a machine with no cloud credentials)."""

    name: ClassVar[str]

    def snapshot_offers(self, spec: Spec) -> list[Offer]:
        """``spec``'s offers from the snapshot, each with ``price_source`` "snapshot DATE"."""


def runs_here(provider: Provider) -> bool:
    """Whether ``provider``'s nodes are processes of this machine (``Provider.local_processes``)."""
    return bool(getattr(provider, "local_processes", False))


def with_default_storage(spec: Spec) -> Spec:
    """``spec`` with every Volume's storage given: its own, else the provider's default.
    ValueError naming the volume and the fix when the provider has no storage; for a
    pool whose nodes run elsewhere (every provider but ``sky.Local()``, whose mounts and
    keys stay on this machine), VolumeCredentialsError (a ValueError) for a storage
    without keys that does not opt in to shipping this machine's AWS credential chain,
    before any machine is started."""
    filled = _with_storages(spec)
    if filled.volumes and not runs_here(spec.provider):
        from skyward.storage.pool_volumes import check_node_credentials

        check_node_credentials(filled.volumes)
    return filled


def _with_storages(spec: Spec) -> Spec:
    """``spec`` with the provider's default storage for each Volume without one."""
    if all(volume.storage is not None for volume in spec.volumes):
        return spec
    default = spec.provider.default_storage(spec)
    volumes = []
    for index, volume in enumerate(spec.volumes):
        if volume.storage is None and default is None:
            raise fail(
                f"Spec.volumes[{index}]", "storage", None,
                f"sky.{type(spec.provider).__name__}() has no object storage of its own to "
                f"mount bucket {volume.bucket!r} from; pass one: sky.Volume(..., "
                "storage=sky.Storage(endpoint, access_key=..., secret_key=...)) or a preset "
                "such as sky.storage.R2(...) or sky.storage.S3(region=..., access_key=..., "
                "secret_key=...)",
            )
        volumes.append(volume if volume.storage is not None else replace(volume, storage=default))
    return replace(spec, volumes=tuple(volumes))
