"""What travels between a process and a pool's collection hosts, and the handles it
travels through.

Ray's actor handles carry no types, so ``HostsHandle`` describes the methods of the
``CollectionHosts`` actor (``actors``) that processes call, ``HostHandle`` one shard's
of them (``ShardHandle``: the actor's methods with the shard's index put first), and the
aliases below the shapes their arguments and answers have on the wire.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Concatenate, Generic, ParamSpec, Protocol, TypeAlias, TypeVar

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
    """One shard of a pool's collection hosts: the methods processes call on it."""

    @property
    def __ray_ready__(self) -> RemoteMethod[[], bool]: ...

    @property
    def call(self) -> RemoteMethod[[bytes], bytes]: ...

    @property
    def call_waiting(self) -> RemoteMethod[[bytes], bytes]: ...

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


class HostsHandle(Protocol):
    """A handle to a pool's ``CollectionHosts`` actor: a shard's methods take its index first."""

    @property
    def __ray_ready__(self) -> RemoteMethod[[], bool]: ...

    @property
    def call(self) -> RemoteMethod[[int, bytes], bytes]: ...

    @property
    def call_waiting(self) -> RemoteMethod[[int, bytes], bytes]: ...

    @property
    def exchange(self) -> RemoteMethod[[int, str, int, list[WireOp]], Exchanged | Marker]: ...

    @property
    def exchange_waiting(self) -> RemoteMethod[[int, str, int, list[WireOp]], Exchanged]: ...

    @property
    def poll(self) -> RemoteMethod[[int, str, float], tuple[list[Snapshot], int]]: ...

    @property
    def renew(self) -> RemoteMethod[[int, list[str]], list[str]]: ...

    @property
    def holder_ended(self) -> RemoteMethod[[int, str, bool], None]: ...

    @property
    def membership_changed(self) -> RemoteMethod[[int | None, str], None]: ...

    @property
    def update_many(self) -> RemoteMethod[[str, dict[int, Items], str | None], Outcome]: ...


class HostsClass(Protocol):
    """``CollectionHosts`` made a Ray actor class: ``options(...)`` then ``remote(...)``
    starts one."""

    def options(self, **options: object) -> HostsClass: ...

    def remote(self, config: CollectionsConfig) -> HostsHandle: ...


class ShardHandle:
    """Shard ``index`` of the ``hosts`` actor, as a ``HostHandle``."""

    __slots__ = ("hosts", "index")

    def __init__(self, hosts: HostsHandle, index: int) -> None:
        self.hosts = hosts
        self.index = index

    @property
    def __ray_ready__(self) -> RemoteMethod[[], bool]:
        return self.hosts.__ray_ready__

    @property
    def call(self) -> RemoteMethod[[bytes], bytes]:
        return _Bound(self.hosts.call, self.index)

    @property
    def call_waiting(self) -> RemoteMethod[[bytes], bytes]:
        return _Bound(self.hosts.call_waiting, self.index)

    @property
    def exchange(self) -> RemoteMethod[[str, int, list[WireOp]], Exchanged | Marker]:
        return _Bound(self.hosts.exchange, self.index)

    @property
    def exchange_waiting(self) -> RemoteMethod[[str, int, list[WireOp]], Exchanged]:
        return _Bound(self.hosts.exchange_waiting, self.index)

    @property
    def poll(self) -> RemoteMethod[[str, float], tuple[list[Snapshot], int]]:
        return _Bound(self.hosts.poll, self.index)

    @property
    def renew(self) -> RemoteMethod[[list[str]], list[str]]:
        return _Bound(self.hosts.renew, self.index)

    @property
    def holder_ended(self) -> RemoteMethod[[str, bool], None]:
        return _Bound(self.hosts.holder_ended, self.index)


class _Bound(Generic[P, R]):
    """``method`` with its first argument, ``first``, given."""

    __slots__ = ("_first", "_method")

    def __init__(self, method: RemoteMethod[Concatenate[int, P], R], first: int) -> None:
        self._method = method
        self._first = first

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]:
        return self._method.remote(self._first, *args, **kwargs)

    def options(self, *, concurrency_group: str) -> _Bound[P, R]:
        return _Bound(self._method.options(concurrency_group=concurrency_group), self._first)
