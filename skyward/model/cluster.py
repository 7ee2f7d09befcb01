"""``Cluster``: what plugin hooks see of a pool's nodes (not ``providers.base.LaunchedCluster``,
which is what a provider hands the pool).

A small frozen, picklable record: the nodes as the provider handed them, their
``InstanceInfo`` (with the GPUs each host reported: ``info.accelerator`` comes from
``nvidia-smi`` on remote hosts, None on local pools), the provider's name, the Spec and
the worker layout. Before the nodes' engine runs (``transform`` and ``bootstrap``)
``infos[i].head_port`` is 0: the engine's port is not known yet.
"""

from __future__ import annotations

from msgspec import Struct

from skyward.core.instance import InstanceInfo
from skyward.model.nodes import NodeHandle
from skyward.model.spec import Spec, Worker


class Cluster(Struct, frozen=True):
    """The pool's nodes, for plugin hooks."""

    nodes: tuple[NodeHandle, ...]
    infos: tuple[InstanceInfo, ...]
    provider: str
    spec: Spec
    worker: Worker = Worker()

    @property
    def head_addr(self) -> str:
        """Node 0's address as its peers reach it."""
        return self.infos[0].head_addr if self.infos else "127.0.0.1"

    @property
    def total_nodes(self) -> int:
        return len(self.infos)

    @property
    def is_local(self) -> bool:
        """True when every node runs on this machine (``sky.Local()``)."""
        return self.provider == "local"

    def nodes_without_gpu(self) -> list[int]:
        """The nodes whose hosts reported no NVIDIA GPU."""
        return [info.node for info in self.infos if info.accelerator is None or info.accelerator.count <= 0]
