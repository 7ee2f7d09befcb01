"""What travels between a process and the host actors, and the handles it travels through.

Ray's actor handles carry no types, so ``HostHandle`` describes the methods of
``CollectionHost`` (``actors``) that processes call through one, and the shapes their
arguments and answers have on the wire.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from ray import ObjectRef

    from skyward.collections.config import CollectionsConfig
    from skyward.collections.markers import Marker

P = ParamSpec("P")
R = TypeVar("R")

EntityKey: TypeAlias = tuple[str, str]
"""(kind, name) of one collection on a host."""
Outcome: TypeAlias = tuple[bool, object]
"""``(True, result)`` or ``(False, exception)``."""
Snapshot: TypeAlias = tuple[str, str, Hashable, object, int]
"""(kind, name, slot, owner's value, owner's version) of one cached slot."""
WireOp: TypeAlias = tuple[str, str, str, tuple[object, ...], Hashable]
"""(kind, name, op, args, slot) of one operation a node cache sends."""
Exchanged: TypeAlias = tuple[list[Outcome], list[Snapshot], int]
"""A host's answer to a batch: each operation's outcome, the snapshots of the slots they
touched, the sequence number of the last one applied."""
Ticket: TypeAlias = tuple[str, int, int]
"""(caller, number of this call, lowest number the caller still waits on) of one strong
call (see ``replies``)."""
Items: TypeAlias = list[tuple[Hashable, object]]
"""(key, value) pairs written to one dict shard."""


class RemoteMethod(Protocol[P, R]):
    """A method of an actor handle: ``remote(...)`` calls it, ``options(...)`` picks its
    concurrency group."""

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]: ...

    def options(self, *, concurrency_group: str) -> RemoteMethod[P, R]: ...


class HostHandle(Protocol):
    """A handle to a ``CollectionHost`` actor: the methods processes call on it."""

    @property
    def __ray_ready__(self) -> RemoteMethod[[], bool]: ...

    @property
    def call(self) -> RemoteMethod[[bytes], bytes]: ...

    @property
    def call_waiting(self) -> RemoteMethod[[bytes], bytes]: ...

    @property
    def update_many(self) -> RemoteMethod[[str, dict[int, Items], dict[int, HostHandle], str | None], Outcome]: ...

    @property
    def prepare(self) -> RemoteMethod[[str, str, tuple[Hashable, ...]], bool]: ...

    @property
    def commit(self) -> RemoteMethod[[str, str, Items, str | None], list[Snapshot]]: ...

    @property
    def abort(self) -> RemoteMethod[[str, str], None]: ...

    @property
    def exchange(self) -> RemoteMethod[[str, int, list[WireOp]], Exchanged | Marker]: ...

    @property
    def exchange_waiting(self) -> RemoteMethod[[str, int, list[WireOp]], Exchanged]: ...

    @property
    def poll(self) -> RemoteMethod[[str, float], tuple[list[Snapshot], int]]: ...

    @property
    def renew(self) -> RemoteMethod[[list[str]], list[str]]: ...

    @property
    def holder_ended(self) -> RemoteMethod[[str, bool], None]: ...

    @property
    def membership_changed(self) -> RemoteMethod[[int | None, str], None]: ...


class HostClass(Protocol):
    """``CollectionHost`` made a Ray actor class: ``options(...)`` then ``remote(...)``
    starts one."""

    def options(self, **options: object) -> HostClass: ...

    def remote(self, config: CollectionsConfig, index: int) -> HostHandle: ...
