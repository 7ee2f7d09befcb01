"""A local Novita GPU instance API (``/gpu-instance/openapi/v1``): ``GET /products``,
``POST /gpu/instance/create``, ``GET /gpu/instance?instanceId=``, ``GET /gpu/instances``,
``POST /gpu/instance/delete``, in Novita's shapes (prices in 1/100,000 USD per hour,
pages of ``pageSize`` by ``pageNum``). A request with a query parameter or a body field
these operations do not declare is refused (400 ``INVALID_ARGUMENT``, naming it)."""

from __future__ import annotations

from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

PRODUCTS = [
    {"id": "p-l4", "name": "L4 24GB", "cpuPerGpu": 8, "memoryPerGpu": 32, "diskPerGpu": 100, "availableDeploy": True,
     "price": 35000, "spotPrice": 17000, "maxGpuNum": 4, "regions": ["US-CA-06"]},
    {"id": "p-4090", "name": "RTX 4090 24GB", "cpuPerGpu": 16, "memoryPerGpu": 62, "diskPerGpu": 100,
     "availableDeploy": True, "price": 69000, "maxGpuNum": 8, "regions": ["US-CA-06", "EU-DE-01"]},
    {"id": "p-a100", "name": "A100 80GB", "cpuPerGpu": 16, "memoryPerGpu": 100, "diskPerGpu": 200,
     "availableDeploy": True, "price": 160000, "spotPrice": 80000, "maxGpuNum": 8, "regions": ["US-CA-06"]},
]

OPERATIONS = (
    Operation("GET", "/products"),
    Operation("POST", "/gpu/instance/create", body=shape(
        "name", "productId", "gpuNum", "rootfsSize", "imageUrl", "imageAuth", "imageAuthId", "ports", "command",
        "clusterId", "networkId", "kind", "month", "billingMode", "minCudaVersion",
        envs=shape("key", "value"), tools=shape("name", "port", "type"), networkStorages=shape("Id", "mountPoint"),
    )),
    Operation("GET", "/gpu/instance", ("instanceId",)),
    Operation("GET", "/gpu/instances", ("pageSize", "pageNum")),
    Operation("POST", "/gpu/instance/delete", body=shape("instanceId")),
)
"""The operations of Novita's GPU instance API the fake serves, with the fields it documents."""
REASONS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}


class FakeNovita(FakeCloud):
    name = "novita"
    prefix = "/gpu-instance/openapi/v1"
    credentials = {"NOVITA_API_KEY": TOKEN}
    operations = OPERATIONS

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
            return {"instances": [self._instance(m) for m in live[(number - 1) * size:number * size]], "total": len(live)}
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
        price = (product["spotPrice"] if spot else product["price"]) * int(body.get("gpuNum", 1))
        return self.add(body["name"], product["id"], spot, body["imageUrl"], key, price, region=body.get("clusterId"),
                        product=product["name"], gpus=int(body.get("gpuNum", 1)))

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        status = {"running": "running", "exited": "exited"}.get(machine.state, "pulling")
        up = machine.state == "running"
        return {
            "id": machine.id, "name": machine.name, "status": status, "imageUrl": machine.image,
            "productId": machine.kind, "productName": machine.extra.get("product", ""), "gpuNum": machine.extra.get("gpus", 1),
            "billingMode": "spot" if machine.spot else "onDemand", "gpuPrice": machine.price,
            "portMappings": [{"port": 22, "endpoint": f"{machine.address}:22", "type": "tcp"}] if up else [],
            "createdAt": str(int(machine.created)), "clusterId": machine.region,
        }
