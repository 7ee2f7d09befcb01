"""A local Vast.ai: ``GET /api/v0/bundles/`` (asks), ``PUT /api/v0/asks/{id}/`` (an ask
rented once, then ``no_such_ask``), ``POST /api/v0/instances/{id}/ssh/``, ``GET
/api/v0/instances/``, ``GET/DELETE /api/v0/instances/{id}/``, in Vast.ai's shapes. A
request with a query parameter or a body field these operations do not declare is
refused (400 ``invalid_args``, naming it)."""

from __future__ import annotations

import json
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

ASKS = [
    {"id": 501, "gpu_name": "L4", "num_gpus": 1, "gpu_ram": 23034, "cpu_cores_effective": 8, "cpu_ram": 32000,
     "disk_space": 100, "dph_total": 0.31, "min_bid": 0.18, "geolocation": "Sweden, SE", "cpu_arch": "amd64"},
    {"id": 502, "gpu_name": "L4", "num_gpus": 1, "gpu_ram": 23034, "cpu_cores_effective": 6, "cpu_ram": 24000,
     "disk_space": 80, "dph_total": 0.34, "min_bid": 0.2, "geolocation": "Sweden, SE", "cpu_arch": "amd64"},
    {"id": 503, "gpu_name": "L4", "num_gpus": 1, "gpu_ram": 23034, "cpu_cores_effective": 8, "cpu_ram": 32000,
     "disk_space": 100, "dph_total": 0.36, "min_bid": 0.21, "geolocation": "Sweden, SE", "cpu_arch": "amd64"},
    {"id": 601, "gpu_name": "RTX_4090", "num_gpus": 2, "gpu_ram": 24564, "cpu_cores_effective": 16,
     "cpu_ram": 64000, "disk_space": 200, "dph_total": 0.7, "min_bid": 0.4, "geolocation": "Texas, US",
     "cpu_arch": "amd64"},
    {"id": 701, "gpu_name": "A100_SXM4", "num_gpus": 1, "gpu_ram": 81920, "cpu_cores_effective": 16,
     "cpu_ram": 128000, "disk_space": 200, "dph_total": 1.05, "min_bid": 0.6, "geolocation": "Texas, US",
     "cpu_arch": "amd64"},
]

OPERATIONS = (
    Operation("GET", "/bundles/", ("q",)),
    Operation("PUT", "/asks/{id}/", body=shape(
        "client_id", "image", "env", "price", "disk", "label", "extra", "onstart", "runtype", "image_login",
        "python_utf8", "lang_utf8", "use_jupyter_lab", "jupyter_dir", "force", "cancel_unavail", "template_hash_id",
        "args",
    )),
    Operation("POST", "/instances/{id}/ssh/", body=shape("ssh_key")),
    Operation("GET", "/instances/"),
    Operation("GET", "/instances/{id}/"),
    Operation("DELETE", "/instances/{id}/"),
)
"""The operations of Vast.ai's API v0 the fake serves, with the fields it documents."""
ERRORS = {400: "invalid_args", 404: "not_found", 405: "method_not_allowed"}


class FakeVastAI(FakeCloud):
    name = "vastai"
    prefix = "/api/v0"
    credentials = {"VAST_API_KEY": TOKEN}
    operations = OPERATIONS

    def __init__(self) -> None:
        super().__init__()
        self.rented: dict[int, str] = {}

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"success": False, "error": ERRORS.get(status, "error"), "msg": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(400, {"success": False, "error": "no_such_ask", "msg": "Instance type no longer available."})

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        parts = [p for p in path.split("/") if p]
        if (method, parts) == ("GET", ["bundles"]):
            wanted = json.loads(query["q"])
            assert wanted["rentable"] == {"eq": True}
            return {"offers": [a for a in ASKS if a["id"] not in self.rented]}
        if method == "PUT" and parts[:1] == ["asks"]:
            return self._rent(int(parts[1]), body)
        if (method, parts) == ("GET", ["instances"]):
            return {"instances": [self._instance(m) for m in self.live()]}
        if parts[:1] == ["instances"] and len(parts) >= 2:
            machine = self.machines.get(parts[1])
            if machine is None or machine.state == "deleted":
                if method == "GET":
                    return {"instances": None}
                raise Answer(404, {"success": False, "error": "no_such_instance", "msg": "not found"})
            if method == "POST" and parts[2:] == ["ssh"]:
                with self.lock:
                    machine.public_key = body["ssh_key"]
                    machine.state = "booting" if machine.state == "pending" else machine.state
                return {"success": True}
            if method == "DELETE":
                self.delete(machine.id)
                return {"success": True}
            return {"instances": self._instance(machine)}
        raise self.no_route(method, path)

    def delete(self, machine_id: str) -> bool:
        """Destroying an instance frees its ask again."""
        freed = super().delete(machine_id)
        with self.lock:
            self.rented = {ask: owner for ask, owner in self.rented.items() if owner != machine_id}
        return freed

    def _rent(self, ask_id: int, body: dict[str, Any]) -> dict[str, Any]:
        ask = next((a for a in ASKS if a["id"] == ask_id), None)
        if ask is None or ask_id in self.rented:
            raise self.no_capacity("")
        if not body.get("image") or body.get("client_id") != "me":
            raise Answer(400, {"success": False, "error": "invalid_args", "msg": "image and client_id required"})
        spot = "price" in body
        machine = self.add(
            body.get("label", ""), f"{ask['num_gpus']}x {ask['gpu_name']}", spot, body["image"], "",
            float(body["price"]) if spot else ask["dph_total"], ask=ask,
        )
        machine.state = "pending"  # until the key is attached
        self.rented[ask_id] = machine.id
        return {"success": True, "new_contract": int(machine.id)}

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        up = machine.state == "running"
        ask = machine.extra.get("ask", ASKS[0])
        status = {"exited": "exited", "running": "running"}.get(machine.state, "loading")
        return {
            "id": int(machine.id), "label": machine.name, "actual_status": status, "intended_status": "running",
            "public_ipaddr": machine.address if up else None, "ssh_host": machine.address if up else None,
            "ssh_port": 22 if up else None, "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "22"}]} if up else {},
            "dph_total": machine.price, "is_bid": machine.spot, "num_gpus": ask["num_gpus"], "gpu_name": ask["gpu_name"],
            "start_date": machine.created, "image_uuid": machine.image,
        }
