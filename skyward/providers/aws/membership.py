"""``EC2Machines``: where an AWS pool's machines come from once it runs (more instances
of the offer it opened with) and how it learns that one is gone (terminated: a spot
instance that ends without the pool asking was interrupted)."""

from __future__ import annotations

from collections.abc import Callable

from skyward.engine.membership import Loss
from skyward.model.nodes import NodeHandle
from skyward.providers.aws.machines import instances_of, state_of
from skyward.providers.aws.session import client, error_code
from skyward.providers.cloud import fields
from skyward.providers.machine_source import MachineSource

ENDED = ("shutting-down", "terminated", "stopping", "stopped")


class EC2Machines(MachineSource):
    """See the module. ``launch_one()`` starts one instance and returns its handle once
    it runs (it registers the instance with the pool's resources, so closing the pool
    terminates it whatever happens)."""

    _noun = "instance"

    def __init__(self, region: str, launch_one: Callable[[], NodeHandle]) -> None:
        super().__init__()
        self._region = region
        self._launch_one = launch_one

    def _start(self, node: int) -> NodeHandle:
        return self._launch_one()

    def release(self, handle: NodeHandle) -> None:
        try:
            client("ec2", self._region).terminate_instances(InstanceIds=[handle.id])
        except Exception as exc:
            if not error_code(exc).startswith("InvalidInstanceID"):
                raise

    def explain(self, node: int, handle: NodeHandle, seen: str) -> Loss | None:
        found = self._states([handle.id]).get(handle.id)
        if found is None or found[0] not in ENDED:
            return None
        return _loss(node, handle, *found)

    def gone(self, handles: dict[int, NodeHandle]) -> list[Loss]:
        states = self._states([handle.id for handle in handles.values()])
        return [
            _loss(node, handle, *states[handle.id])
            for node, handle in handles.items()
            if handle.id in states and states[handle.id][0] in ENDED
        ]

    def _states(self, ids: list[str]) -> dict[str, tuple[str, str, bool]]:
        """``(state, reason, spot)`` by instance id."""
        if not ids:
            return {}
        reservations = fields.objects(client("ec2", self._region).describe_instances(InstanceIds=ids), "Reservations")
        return {
            fields.text(item, "InstanceId"): (
                state_of(item), fields.text(fields.obj(item, "StateReason"), "Message", ""),
                item.get("InstanceLifecycle") == "spot",
            )
            for item in instances_of(reservations)
        }


def _loss(node: int, handle: NodeHandle, state: str, reason: str, spot: bool) -> Loss:
    why = f"instance {handle.id} is {state}" + (f" ({reason})" if reason else "")
    if spot:
        return Loss(node, f"spot interruption: {why}", preempted=True)
    return Loss(node, why)
