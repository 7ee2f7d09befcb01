"""The plugins' ``around_client`` hooks, held open on the client while a pool is open."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Protocol

from skyward.core.instance import InstanceInfo
from skyward.model.cluster import Cluster
from skyward.model.nodes import NodeHandle
from skyward.model.plugin import ClientPool
from skyward.model.spec import Spec, Worker
from skyward.plugins.hooks import blame, each


class LaunchedNodes(Protocol):
    """What the hooks are shown of a provider's cluster: its nodes and their infos."""

    @property
    def nodes(self) -> tuple[NodeHandle, ...]: ...

    @property
    def infos(self) -> tuple[InstanceInfo, ...]: ...


class ClientPlugins:
    """Enters every plugin's ``around_client(pool, cluster)`` in order once the pool is
    ready; ``close`` exits them in reverse order (at most once)."""

    def __init__(self) -> None:
        self._stack = ExitStack()

    def enter(self, pool: ClientPool, spec: Spec, worker: Worker, provider_cluster: LaunchedNodes) -> None:
        """``provider_cluster`` is the provider's Cluster (its nodes and infos are shown to the hooks)."""
        hooks = list(each(spec.plugins, "around_client"))
        if not hooks:
            return
        view = Cluster(provider_cluster.nodes, provider_cluster.infos, spec.provider.name, spec, worker)
        for plugin, around in hooks:
            with blame(plugin, "around_client"):
                self._stack.enter_context(around(pool, view))

    def close(self) -> None:
        """Exit the hooks entered (what an exit raises propagates after the others exit)."""
        stack, self._stack = self._stack, ExitStack()
        stack.close()
