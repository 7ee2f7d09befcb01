"""Inside a task: where am I (``instance_info``, ``is_head``) and which data is mine (``shard``).

A node's agent installs a ``NodeContext`` once; each running task sets ``TaskContext``.
Outside a task ``instance_info()`` returns None.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Mapping, Sequence, Sized
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from msgspec import Struct

from skyward.core.validation import check_flag


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """One node of the pool as its peers see it."""

    node: int
    private_ip: str
    public_ip: str | None = None


@dataclass(frozen=True, slots=True)
class AcceleratorInfo:
    """The accelerator on this node."""

    type: str
    count: float
    memory_gb: float | None = None
    is_trainium: bool = False


@dataclass(frozen=True, slots=True)
class NetworkInfo:
    """The node's network interface toward its peers."""

    interface: str
    bandwidth_gbps: float | None = None


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """This worker's place in the pool."""

    node: int
    worker: int
    total_nodes: int
    workers_per_node: int
    accelerators: float
    total_accelerators: float
    head_addr: str
    head_port: int
    job_id: str
    peers: list[PeerInfo] = field(default_factory=list)
    accelerator: AcceleratorInfo | None = None
    network: NetworkInfo = field(default_factory=lambda: NetworkInfo("lo"))

    @property
    def global_worker_index(self) -> int:
        """``node * workers_per_node + worker``."""
        return self.node * self.workers_per_node + self.worker

    @property
    def total_workers(self) -> int:
        """``total_nodes * workers_per_node``."""
        return self.total_nodes * self.workers_per_node

    @property
    def is_head(self) -> bool:
        """True on the single head worker (global worker index 0)."""
        return self.global_worker_index == 0

    @property
    def hostname(self) -> str:
        """The host name of the machine running this worker."""
        return socket.gethostname()


class MembershipView(Struct, frozen=True):
    """The pool's membership as the client saw it at ``epoch``: what a node's
    ``InstanceInfo`` says about the others (its own rank never changes)."""

    epoch: int
    total_nodes: int
    peers: tuple[PeerInfo, ...]
    total_accelerators: float

    def applied(self, info: InstanceInfo) -> InstanceInfo:
        """``info`` with this membership."""
        return replace(
            info, total_nodes=self.total_nodes, peers=list(self.peers), total_accelerators=self.total_accelerators
        )


class TaskContext(Struct, frozen=True):
    """What a running task knows about itself."""

    task_id: str
    name: str
    info: InstanceInfo


_node_info: InstanceInfo | None = None
_task: ContextVar[TaskContext | None] = ContextVar("skyward_task", default=None)


def install_node_info(info: InstanceInfo) -> None:
    """Called by a node agent (or executor process) to record where it runs, at start
    and when the pool's membership changed."""
    global _node_info
    _node_info = info


def current_task() -> TaskContext | None:
    """The task running in this thread, or None outside tasks."""
    return _task.get()


def task_scope() -> ContextVar[TaskContext | None]:
    """The context variable agents set around a task."""
    return _task


def instance_info() -> InstanceInfo | None:
    """This worker's ``InstanceInfo`` inside a task; None when not running in a pool."""
    task = _task.get()
    if task is not None:
        return task.info
    return _node_info


def is_head(info: InstanceInfo | None = None) -> bool:
    """True on the head worker; with no argument, asks ``instance_info()`` (False outside)."""
    info = info if info is not None else instance_info()
    return bool(info is not None and info.is_head)


def shard(
    *data: object,
    shuffle: bool = False,
    seed: int | None = 0,
    drop_last: bool = False,
    node: int | None = None,
    total_nodes: int | None = None,
) -> Any:  # the user's data, sliced: the input's type, or a tuple of them
    """This node's slice of each sequence, of the same type as the input.

    Indices are strided (``indices[node::total_nodes]``), so slices are disjoint and
    together complete. ``shuffle`` permutes indices with ``seed`` identically on every
    node (``seed=None``: a seed derived from the pool's job id, the same on every node of
    one pool, different across pools); ``drop_last`` trims the tail so all nodes get the same count. Several arrays
    share the same indices (they must have the same length) and come back as a tuple.
    ``node``/``total_nodes`` default to this task's place; outside a task pass both.
    Raises ValueError for mismatched lengths or a bad node, TypeError for non-sequences.
    """
    if not data:
        raise TypeError("shard() needs at least one sequence, e.g. sky.shard(items)")
    check_flag("shard", "shuffle", shuffle)
    check_flag("shard", "drop_last", drop_last)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"shard(seed={seed!r}): use an int (the same on every node) or None")
    node, total_nodes = place_in_pool(
        "shard", ("node", node), ("total_nodes", total_nodes), lambda info: (info.node, info.total_nodes),
        "shard() outside a task does not know the node: pass node= and total_nodes=, "
        "or call it inside a @sky.function running on a pool",
    )
    length = _length(data[0])
    for other in data[1:]:
        if _length(other) != length:
            raise ValueError(
                f"shard() got sequences of different lengths ({length} and {_length(other)}); "
                "aligned sharding needs equal lengths"
            )
    usable = (length // total_nodes) * total_nodes if drop_last else length
    if shuffle:
        order = list(range(length))
        random.Random(_shared_seed(seed)).shuffle(order)
        picked: list[int] | None = order[:usable][node::total_nodes]
    else:
        picked = None
    shards = tuple(_take(seq, node, total_nodes, usable, picked) for seq in data)
    return shards[0] if len(shards) == 1 else shards


def _shared_seed(seed: int | None) -> int | str:
    if seed is not None:
        return seed
    info = instance_info()
    if info is None:
        raise ValueError(
            "shard(shuffle=True, seed=None) outside a task has no pool to share a seed with: "
            "pass seed= (the same on every node)"
        )
    return info.job_id


def place_in_pool(
    caller: str,
    index: tuple[str, int | None],
    count: tuple[str, int | None],
    default: Callable[[InstanceInfo], tuple[int, int]],
    outside: str,
) -> tuple[int, int]:
    """A validated ``(index, count)``: one place among ``count`` (a node among the pool's
    nodes, a worker among its workers), each given as (parameter name, value); a None value
    is taken from ``default(instance_info())``. Raises RuntimeError(``outside``) when a value
    is None outside a task, and ValueError naming ``caller(name=value)`` unless the count is
    an int >= 1 and the index an int in 0..count-1."""
    (index_name, place), (count_name, total) = index, count
    if place is None or total is None:
        info = instance_info()
        if info is None:
            raise RuntimeError(outside)
        own_place, own_total = default(info)
        place = own_place if place is None else place
        total = own_total if total is None else total
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ValueError(f"{caller}({count_name}={total!r}) must be an int >= 1")
    if isinstance(place, bool) or not isinstance(place, int) or not 0 <= place < total:
        raise ValueError(f"{caller}({index_name}={place!r}) must be an int in 0..{total - 1}")
    return place, total


def _length(seq: object) -> int:
    if isinstance(seq, (AbstractSet, Mapping)):
        kind = "dict" if isinstance(seq, Mapping) else "set"
        fix = "list(d.items()) or list(d)" if kind == "dict" else "sorted(s) (the same order on every node)"
        raise TypeError(
            f"shard() takes sequences, got a {kind} ({type(seq).__name__}), which has no positions "
            f"to split: pass {fix}"
        )
    try:
        if isinstance(seq, Sized):
            return len(seq)
    except TypeError:
        pass
    raise TypeError(
        f"shard() takes sequences (list, tuple, range, numpy array, torch tensor, ...), "
        f"got {type(seq).__name__}"
    )


def _take(seq: Any, node: int, total: int, usable: int, picked: list[int] | None) -> object:
    if picked is None:
        try:
            return seq[:usable][node::total]
        except (TypeError, KeyError, ValueError):
            picked = list(range(usable))[node::total]
    return _gather(seq, picked)


def _gather(seq: Any, indices: list[int]) -> object:
    module = type(seq).__module__.split(".")[0]
    if module == "numpy":
        import numpy

        return seq[numpy.asarray(indices, dtype=numpy.intp)]
    if module == "torch":
        import torch

        return seq[torch.as_tensor(indices, dtype=torch.long)]
    items = [seq[i] for i in indices]
    if isinstance(seq, str):
        return "".join(items)
    if isinstance(seq, (list, range)):
        return items
    if isinstance(seq, tuple):
        return type(seq)(items) if type(seq) is tuple else tuple(items)
    if isinstance(seq, Sequence):
        try:
            return type(seq)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    return items
