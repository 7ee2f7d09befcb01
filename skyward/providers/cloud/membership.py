"""``CloudMachines``: where a machine-cloud pool's machines come from once it runs (more
machines of the offer it opened with) and how it learns that one is gone (the cloud
stopped or deleted it without the pool asking: an interruptible machine reclaimed is a
preemption)."""

from __future__ import annotations

from collections.abc import Callable

from skyward.engine.membership import Loss
from skyward.model.nodes import NodeHandle
from skyward.providers.base import TeardownError
from skyward.providers.cloud import machines
from skyward.providers.cloud.api import Machine, MachineAPI
from skyward.providers.machine_source import MachineSource


class CloudMachines(MachineSource):
    """See the module. ``create_one(node)`` creates one machine and returns its handle once
    it runs; it records the machine in ``resources``, so the pool's teardown deletes it
    whatever happens."""

    def __init__(
        self, api: MachineAPI, resources: machines.PoolMachines, create_one: Callable[[int], NodeHandle]
    ) -> None:
        super().__init__()
        self._api = api
        self._resources = resources
        self._create_one = create_one

    def _start(self, node: int) -> NodeHandle:
        return self._create_one(node)

    def release(self, handle: NodeHandle) -> None:
        """Delete ``handle``'s machine and confirm it; TeardownError when it is still there."""
        left = machines.delete_machines(self._api, [handle.id], self._resources.cloud)
        if left:
            raise TeardownError(f"could not confirm the deletion of {'; '.join(left)} on {self._resources.cloud}")
        with self._lock:
            if handle.id in self._resources.machines:
                self._resources.machines.remove(handle.id)

    def explain(self, node: int, handle: NodeHandle, seen: str) -> Loss | None:
        machine = self._api.get(handle.id)
        if machine is not None and machine.state not in ("stopped", "ended"):
            return None
        return self._loss(node, handle, machine)

    def gone(self, handles: dict[int, NodeHandle]) -> list[Loss]:
        present = {machine.id: machine for machine in self._api.machines()}
        return [
            self._loss(node, handle, present.get(handle.id))
            for node, handle in handles.items()
            if handle.id not in present or present[handle.id].state in ("stopped", "ended")
        ]

    def _loss(self, node: int, handle: NodeHandle, machine: Machine | None) -> Loss:
        state = "gone" if machine is None else machine.state
        why = f"{self._resources.cloud} machine {handle.id} is {state}"
        if handle.spot:
            return Loss(node, f"spot interruption: {why}", preempted=True)
        return Loss(node, why)
