"""RunPod's API as ``MachineAPI``: pods through the REST API (``rest.runpod.io/v1``:
``POST /pods``, ``GET /pods``, ``GET /pods/{id}``, ``DELETE /pods/{id}``), GPU types and
prices through the GraphQL API (``api.runpod.io/graphql``, ``gpuTypes``). The key is
``RUNPOD_API_KEY`` (or ``apikey`` in ``~/.runpod/config.toml``), sent as a Bearer token.
A pod gets the pool's public key in ``PUBLIC_KEY``, which RunPod's images install for
root's SSH; port 22 is exposed over TCP and reached at the pod's public address and
mapped port."""

from __future__ import annotations

from collections.abc import Iterable

from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CloudAPIError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, capacity_errors
from skyward.providers.cloud.keys import KeysInOrders

REST_URL = "https://rest.runpod.io/v1"
GRAPHQL_URL = "https://api.runpod.io"
KEY = credentials.Source(("RUNPOD_API_KEY",), "~/.runpod/config.toml", "apikey")
GPU_COUNTS = (1, 2, 4, 8)
GPU_TYPES = """query GpuTypes { gpuTypes { id displayName memoryInGb secureCloud communityCloud
  securePrice communityPrice secureSpotPrice communitySpotPrice maxGpuCount
  lowestPrice(input: {gpuCount: 1}) { minVcpu minMemory } } }"""
NO_CAPACITY = ("no longer any instances available", "no instances available", "not enough", "out of stock")


class RunPodAPI(KeysInOrders):
    """Calls RunPod with the key from the environment (CredentialsError without one)."""

    def __init__(self, cloud_type: str) -> None:
        (key,) = credentials.require("RunPod", [KEY])
        self._rest = bearer_client("RunPod", "runpod", REST_URL, key, KEY.describe())
        self._graphql = bearer_client("RunPod", "runpod_graphql", GRAPHQL_URL, key, KEY.describe())
        self._cloud_type = cloud_type
        self._cheapest: dict[tuple[str, bool], str] = {}
        """For cloud_type "all": by (GPU type, spot), the cloud ("SECURE", "COMMUNITY") whose
        price the listing showed (RunPod's REST API takes one of the two, not "ALL")."""

    def machine_types(self, region: str | None) -> list[MachineType]:
        answer = self._graphql.call("POST", "/graphql", "listing GPU types and prices", json={"query": GPU_TYPES})
        kinds = []
        for gpu in fields.objects(fields.obj(fields.as_object(answer), "data"), "gpuTypes"):
            price, spot = self._prices(gpu)
            lowest = fields.obj(gpu, "lowestPrice")
            gpu_id = fields.text(gpu, "id")
            for count in GPU_COUNTS:
                if count > fields.integer(gpu, "maxGpuCount", 8) or (price is None and spot is None):
                    continue
                kinds.append(MachineType(
                    name=f"{count}x {gpu_id}", ref=gpu_id,
                    vcpus=fields.number(lowest, "minVcpu", 4) * count,
                    memory_gb=fields.number(lowest, "minMemory", 16) * count,
                    price=None if price is None else round(price * count, 6),
                    spot_price=None if spot is None else round(spot * count, 6), region=region,
                    accelerator=fields.text(gpu, "displayName", "") or gpu_id, accelerator_count=count,
                    accelerator_memory_gb=fields.number(gpu, "memoryInGb", 0) or None,
                ))
        return kinds

    def create(self, order: Order) -> str:
        body: dict[str, object] = {
            "name": order.name, "imageName": order.image, "gpuTypeIds": [order.machine_type.ref],
            "gpuCount": order.machine_type.accelerator_count,
            "cloudType": self._cloud(order.machine_type.ref, order.spot),
            "interruptible": order.spot, "ports": ["22/tcp"], "supportPublicIp": True,
            "containerDiskInGb": order.disk_gb or 50, "env": {"PUBLIC_KEY": order.public_key},
        }
        if order.machine_type.region:
            body["dataCenterIds"] = [order.machine_type.region]
        with capacity_errors(NO_CAPACITY, f"RunPod has no {order.machine_type.name} right now"):
            pod = self._rest.call("POST", "/pods", f"creating pod {order.name}", json=body)
        return fields.text(fields.as_object(pod), "id")

    def get(self, machine_id: str) -> Machine | None:
        pod = fields.as_object(self._rest.read(f"/pods/{machine_id}", f"reading pod {machine_id}"))
        return _machine(pod) if pod else None

    def machines(self) -> list[Machine]:
        return [_machine(pod) for pod in fields.as_objects(self._rest.call("GET", "/pods", "listing pods"))]

    def delete(self, machine_id: str) -> None:
        """Terminate the pod. RunPod answers a pod it no longer has with 400 ("Invalid Pod
        ID": its document lists no 404 there), so a 400 is fine when the pod is gone."""
        try:
            self._rest.remove(f"/pods/{machine_id}", f"terminating pod {machine_id}")
        except CloudAPIError as exc:
            left = self.get(machine_id) if exc.status == 400 else None
            if exc.status != 400 or (left is not None and left.state != "ended"):
                raise

    def _prices(self, gpu: JsonObject) -> tuple[float | None, float | None]:
        kinds = {"secure": ("secure",), "community": ("community",), "all": ("secure", "community")}[self._cloud_type]
        offered = [kind for kind in kinds if gpu.get(f"{kind}Cloud")]
        found: list[float | None] = []
        for spot, field in ((False, "Price"), (True, "SpotPrice")):
            prices = {kind: fields.number(gpu, f"{kind}{field}", 0) for kind in offered}
            price = _lowest(prices.values())
            cloud = next((kind for kind, value in prices.items() if value and value == price), "secure")
            self._cheapest[(fields.text(gpu, "id", ""), spot)] = cloud.upper()
            found.append(price)
        return found[0], found[1]

    def _cloud(self, gpu_id: str, spot: bool) -> str:
        """The ``cloudType`` of a pod: the chosen cloud, or for "all" the one whose price
        the offer showed (secure where it was not listed here)."""
        if self._cloud_type != "all":
            return self._cloud_type.upper()
        return self._cheapest.get((gpu_id, spot), "SECURE")


def _lowest(values: Iterable[float]) -> float | None:
    prices = [v for v in values if v]
    return min(prices) if prices else None


def _machine(pod: JsonObject) -> Machine:
    status = fields.text(pod, "desiredStatus", "")
    port = fields.integer(fields.obj(pod, "portMappings"), "22", 0) or None
    host = fields.text(pod, "publicIp", "") or None
    state: MachineState = "ended" if status == "TERMINATED" else "stopped" if status == "EXITED" else "running" if status == "RUNNING" and host and port else "starting"
    gpu = fields.text(fields.obj(pod, "gpu"), "id", "") or fields.text(fields.obj(pod, "machine"), "gpuTypeId", "")
    return Machine(
        fields.text(pod, "id"), fields.text(pod, "name", ""), state, host, port or 22, None,
        fields.number_or_none(pod, "costPerHr"), fields.flag(pod, "interruptible"), gpu,
        epoch(pod.get("lastStartedAt")),
    )
