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
            "gpuCount": order.machine_type.accelerator_count, "cloudType": self._cloud_type.upper(),
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
        self._rest.remove(f"/pods/{machine_id}", f"terminating pod {machine_id}")

    def _prices(self, gpu: JsonObject) -> tuple[float | None, float | None]:
        kinds = {"secure": ("secure",), "community": ("community",), "all": ("secure", "community")}[self._cloud_type]
        offered = [kind for kind in kinds if gpu.get(f"{kind}Cloud")]
        price = _lowest(fields.number(gpu, f"{kind}Price", 0) for kind in offered)
        spot = _lowest(fields.number(gpu, f"{kind}SpotPrice", 0) for kind in offered)
        return price, spot


def _lowest(values: Iterable[float]) -> float | None:
    prices = [v for v in values if v]
    return min(prices) if prices else None


def _machine(pod: JsonObject) -> Machine:
    status = fields.text(pod, "desiredStatus", "")
    port = fields.integer(fields.obj(pod, "portMappings"), "22", 0) or None
    host = fields.text(pod, "publicIp", "") or None
    state: MachineState = "ended" if status == "TERMINATED" else "stopped" if status == "EXITED" else "running" if status == "RUNNING" and host and port else "starting"
    created = pod.get("createdAt")
    return Machine(
        fields.text(pod, "id"), fields.text(pod, "name", ""), state, host, port or 22, None,
        fields.number_or_none(pod, "costPerHr"), fields.flag(pod, "interruptible"),
        fields.text(pod, "gpuTypeId", ""), epoch(created),
    )
