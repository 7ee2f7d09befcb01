"""A local Novita GPU instance API (``/gpu-instance/openapi/v1``): ``GET /products``,
``POST /gpu/instance/create``, ``GET /gpu/instance?instanceId=``, ``GET /gpu/instances``,
``POST /gpu/instance/delete``, in the shapes of Novita's API reference, pinned in
``descriptions/novita`` (prices in 1/100,000 USD per hour, a spot price as text; an
instance's ``cpuNum``, ``memory`` and ``gpuNum`` as text; pages of ``pageSize`` by
``pageNum`` with their ``total``; a listed instance's ports without their endpoint). A
request with a query parameter or a body field these operations do not declare is
refused (400 ``INVALID_ARGUMENT``, naming it)."""

from __future__ import annotations

from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape


def _product(id_: str, name: str, cpus: int, memory: int, disk: int, price: int, spot: int | None,
             regions: list[str]) -> dict[str, Any]:
    """A product with every field Novita's API reference requires of one."""
    shown: dict[str, Any] = {
        "id": id_, "name": name, "cpuPerGpu": cpus, "memoryPerGpu": memory, "diskPerGpu": disk, "availableDeploy": True,
        "minRootFS": 10, "maxRootFS": 6144, "minLocalStorage": 0, "maxLocalStorage": 0, "regions": regions,
        "price": price, "monthlyPrice": [], "billingMethods": ["onDemand", "spot"] if spot else ["onDemand"],
        "inventoryState": "normal",
    }
    if spot:
        shown["spotPrice"] = str(spot)
    return shown


PRODUCTS = [
    _product("p-l4", "L4 24GB", 8, 32, 100, 35000, 17000, ["US-CA-06"]),
    _product("p-4090", "RTX 4090 24GB", 16, 62, 100, 69000, None, ["US-CA-06", "EU-DE-01"]),
    _product("p-a100", "A100 80GB", 16, 100, 200, 160000, 80000, ["US-CA-06"]),
]

OPERATIONS = (
    Operation("GET", "/products", ("clusterId", "gpuNum", "productName", "minCpuPerGpu", "minMemoryPerGpu", "minRootFSSize",
                                   "billingMethod")),
    Operation("POST", "/gpu/instance/create", body=shape(
        "name", "productId", "gpuNum", "rootfsSize", "imageUrl", "imageAuth", "imageAuthId", "ports", "command",
        "entrypoint", "clusterId", "networkId", "kind", "month", "billingMode", "autoRenew", "autoRenewMonth",
        "minCudaVersion", envs=shape("key", "value"), tools=shape("name", "port", "type"),
        networkStorages=shape("Id", "mountPoint"),
    )),
    Operation("GET", "/gpu/instance", ("instanceId",)),
    Operation("GET", "/gpu/instances", ("pageSize", "pageNum", "name", "productName", "status")),
    Operation("POST", "/gpu/instance/delete", body=shape("instanceId")),
)
"""The operations of Novita's GPU instance API the fake serves, with the fields it documents."""
REASONS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}


class FakeNovita(FakeCloud):
    name = "novita"
    prefix = "/gpu-instance/openapi/v1"
    credentials = {"NOVITA_API_KEY": TOKEN}
    operations = OPERATIONS
    pinned = "novita"

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"code": status, "reason": REASONS.get(status, "UNKNOWN"), "message": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(400, {"code": 400, "reason": "INSUFFICIENT_RESOURCE", "message": "insufficient resource, please try later"})

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/products"):
            return {"data": PRODUCTS}
        if (method, path) == ("POST", "/gpu/instance/create"):
            return {"id": self._create(body).id}
        if (method, path) == ("GET", "/gpu/instances"):
            size, number, live = int(query.get("pageSize", 10)), int(query.get("pageNum", 1)), self.live()
            return {"instances": [self._listed(m) for m in live[(number - 1) * size:number * size]], "total": len(live)}
        if (method, path) == ("GET", "/gpu/instance"):
            return self._instance(self._find(query.get("instanceId", "")))
        if (method, path) == ("POST", "/gpu/instance/delete"):
            self.delete(self._find(body.get("instanceId", "")).id)
            return {}
        raise self.no_route(method, path)

    def _find(self, machine_id: str) -> FakeMachine:
        machine = self.machines.get(machine_id)
        if machine is None or machine.state == "deleted":
            raise Answer(404, {"code": 404, "reason": "INSTANCE_NOT_FOUND", "message": "instance not found"})
        return machine

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        product = next((p for p in PRODUCTS if p["id"] == body.get("productId")), None)
        if product is None or not body.get("imageUrl") or "22/tcp" not in str(body.get("ports")):
            raise Answer(400, {"code": 400, "reason": "INVALID_ARGUMENT", "message": "productId, imageUrl and ports are required"})
        key = next((e["value"] for e in body.get("envs", []) if e["key"] == "PUBLIC_KEY"), "")
        spot = body.get("billingMode") == "spot"
        price = int(product["spotPrice"] if spot else product["price"]) * int(body.get("gpuNum", 1))
        gpus = int(body.get("gpuNum", 1))
        return self.add(body["name"], product["id"], spot, body["imageUrl"], key, price, region=body.get("clusterId"),
                        product=product["name"], gpus=gpus, cpus=product["cpuPerGpu"] * gpus,
                        memory=product["memoryPerGpu"] * gpus, rootfs=int(body.get("rootfsSize", 10)),
                        command=str(body.get("command", "")))

    def _common(self, machine: FakeMachine) -> dict[str, Any]:
        """What a listed instance and a read one share, as Novita's API reference has them."""
        status = {"running": "running", "exited": "exited"}.get(machine.state, "pulling")
        return {
            "id": machine.id, "name": machine.name, "clusterId": machine.region or "US-CA-06", "status": status,
            "imageUrl": machine.image, "imageAuthId": "", "command": machine.extra.get("command", ""),
            "entrypoint": "", "cpuNum": str(machine.extra.get("cpus", 8)), "memory": str(machine.extra.get("memory", 32)),
            "gpuNum": str(machine.extra.get("gpus", 1)), "kind": "gpu",
            "billingMode": "spot" if machine.spot else "onDemand", "endTime": "-1",
        }

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        """An instance as ``GET /gpu/instance`` shows it (ports with their endpoint; no product, price or creation time)."""
        up = machine.state == "running"
        return {
            **self._common(machine), "clusterName": machine.region or "US-CA-06",
            "portMappings": [{"port": 22, "endpoint": f"{machine.address}:22", "type": "tcp"}] if up else [],
        }

    def _listed(self, machine: FakeMachine) -> dict[str, Any]:
        """An instance as ``GET /gpu/instances`` lists it (its product; ports without their endpoint)."""
        up = machine.state == "running"
        return {
            **self._common(machine), "productId": machine.kind, "productName": machine.extra.get("product", ""),
            "rootfsSize": machine.extra.get("rootfs", 50), "portMappings": [{"port": 22, "type": "tcp"}] if up else [],
        }
