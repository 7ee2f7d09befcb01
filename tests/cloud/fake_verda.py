"""A local Verda (DataCrunch): ``POST /v1/oauth2/token`` (client credentials),
``GET /v1/instance-types``, ``GET /v1/instance-availability``, ``/v1/sshkeys``,
``POST/GET /v1/instances``, ``GET /v1/instances/{id}`` and ``PUT /v1/instances``
(``action: delete``), in Verda's shapes. A request with a query parameter or a body field
these operations do not declare is refused (400 ``invalid_request``, naming it). Every
exchange is checked against Verda's official SDKs' models (``pinned``:
tests/cloud/descriptions/verda): an instance type and an instance carry every field the
SDKs read, a create answers the new id as plain text, deleting answers 202 with a result
per instance, and errors carry only the codes the SDKs know."""

from __future__ import annotations

import datetime
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

CLIENT_ID, CLIENT_SECRET = "client-id", "client-secret"


def _type(type_id: str, name: str, price: str, spot: str, cores: int, gpus: int, gpu: str, memory: int,
          gpu_memory: int) -> dict[str, Any]:
    """An instance type as ``GET /instance-types`` shows it (every field the SDKs read)."""
    return {
        "id": type_id, "instance_type": name, "price_per_hour": price, "spot_price": spot,
        "description": gpu or f"{cores} CPU", "cpu": {"description": f"{cores} CPU", "number_of_cores": cores},
        "gpu": {"description": gpu, "number_of_gpus": gpus}, "memory": {"description": f"{memory}GB RAM",
                                                                       "size_in_gigabytes": memory},
        "gpu_memory": {"description": f"{gpu_memory}GB VRAM" if gpu_memory else "", "size_in_gigabytes": gpu_memory},
        "storage": {"description": "dynamic"}, "best_for": [], "model": gpu.split(" ", 1)[-1] if gpus else "CPU",
        "name": name, "p2p": "", "currency": "usd", "manufacturer": "NVIDIA" if gpus else "AMD",
        "display_name": name, "supported_os": ["ubuntu-24.04-cuda-12.8-open-docker"],
    }


TYPES = [
    _type("t1", "CPU.4V.16G", "0.0845", "0.0300", 4, 0, "", 16, 0),
    _type("t2", "1L40S.20V", "0.91", "0.30", 20, 1, "1x L40S 48GB", 60, 48),
    _type("t3", "8H100.80S.176V", "21.92", "7.12", 176, 8, "8x H100 SXM5 80GB", 1480, 640),
    _type("t4", "1A100.22V", "1.29", "0.45", 22, 1, "1x A100 SXM4 80GB", 120, 80),
]
AVAILABLE = {"FIN-01": ["CPU.4V.16G", "1L40S.20V", "1A100.22V"], "FIN-02": ["CPU.4V.16G", "8H100.80S.176V"]}
"""What each location has, on demand and spot alike."""
VOLUME = shape("name", "size", "type", "on_spot_discontinue")
OPERATIONS = (
    Operation("POST", "/oauth2/token", body=shape("grant_type", "client_id", "client_secret", "refresh_token")),
    Operation("GET", "/instance-types", ("currency",)),
    Operation("GET", "/instance-availability", ("is_spot", "location_code")),
    Operation("GET", "/sshkeys"),
    Operation("POST", "/sshkeys", body=shape("name", "key")),
    Operation("DELETE", "/sshkeys/{id}"),
    Operation("GET", "/instances"),
    Operation("POST", "/instances", body=shape(
        "instance_type", "image", "ssh_key_ids", "startup_script_id", "hostname", "description", "location_code",
        "is_spot", "coupon", "existing_volumes", "contract", "pricing", os_volume=VOLUME, volumes=VOLUME,
    )),
    Operation("PUT", "/instances", body=shape("action", "id", "volume_ids", "delete_permanently")),
    Operation("GET", "/instances/{id}"),
)
"""The operations of Verda's API v1 the fake serves, with the fields it documents."""
ERROR_CODES = {400: "invalid_request", 401: "unauthorized_request", 403: "forbidden_action", 404: "not_found",
               405: "invalid_request"}
"""Verda's error codes by status: only those its SDKs know (``ErrorCodes``)."""


class FakeVerda(FakeCloud):
    name = "verda"
    prefix = "/v1"
    credentials = {"VERDA_CLIENT_ID": CLIENT_ID, "VERDA_CLIENT_SECRET": CLIENT_SECRET}
    operations = OPERATIONS
    pinned = "verda"

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"code": ERROR_CODES.get(status, "server_error"), "message": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(400, {"code": "invalid_request", "message": "Not enough resources available for this instance type"})

    def success(self, method: str, path: str) -> int:
        """202 for an action on instances (a result per instance), else 200."""
        return 202 if (method, path) == ("PUT", "/instances") else 200

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/oauth2/token"):
            if (body or {}).get("client_id") != CLIENT_ID or body.get("client_secret") != CLIENT_SECRET:
                raise Answer(401, {"code": "unauthorized_request", "message": "Invalid client credentials"})
            return {"access_token": TOKEN, "refresh_token": "r", "expires_in": 3600, "token_type": "Bearer", "scope": "fullAccess"}
        if (method, path) == ("GET", "/instance-types"):
            return TYPES
        if (method, path) == ("GET", "/instance-availability"):
            places = [query["location_code"]] if "location_code" in query else list(AVAILABLE)
            return [{"location_code": p, "availabilities": AVAILABLE.get(p, [])} for p in places]
        if path == "/sshkeys":
            if method == "POST":
                key_id = f"key-{self.new_id()}"
                self.keys[key_id] = {"id": key_id, "name": body["name"], "key": body["key"]}
                return key_id.encode()  # the id as plain text
            return list(self.keys.values())
        if path.startswith("/sshkeys/") and method == "DELETE":
            if self.keys.pop(path.removeprefix("/sshkeys/"), None) is None:
                raise Answer(404, {"code": "not_found", "message": "SSH key not found"})
            return None
        if path == "/instances":
            if method == "POST":
                return self._create(body).id.encode()  # the id as plain text
            if method == "PUT":
                assert body["action"] == "delete"
                results = []
                for machine_id in body["id"]:
                    found = self.machines.get(machine_id)
                    if found is None or found.state == "deleted":
                        results.append({"action": "delete", "instanceId": machine_id, "status": "error",
                                        "error": "Instance not found", "statusCode": 404})
                        continue
                    self.delete(machine_id)
                    results.append({"action": "delete", "instanceId": machine_id, "status": "success"})
                return results
            return [self._instance(m) for m in self.live()]
        if path.startswith("/instances/"):
            machine = self.machines.get(path.removeprefix("/instances/"))
            if machine is None or machine.state == "deleted":
                raise Answer(404, {"code": "not_found", "message": "Instance not found"})
            return self._instance(machine)
        raise self.no_route(method, path)

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        kind = next((t for t in TYPES if t["instance_type"] == body.get("instance_type")), None)
        if kind is None or not body.get("image") or not body.get("hostname"):
            raise Answer(400, {"code": "invalid_request", "message": "instance_type, image and hostname are required"})
        if body.get("location_code") not in AVAILABLE or kind["instance_type"] not in AVAILABLE[body["location_code"]]:
            raise self.no_capacity(kind["instance_type"])
        keys = [self.keys[k]["key"] for k in body.get("ssh_key_ids", []) if k in self.keys]
        if not keys:
            raise Answer(400, {"code": "invalid_request", "message": "unknown ssh_key_ids"})
        spot = bool(body.get("is_spot"))
        price = float(kind["spot_price" if spot else "price_per_hour"])
        return self.add(body["hostname"], kind["instance_type"], spot, body["image"], keys[0], price,
                        region=body["location_code"], key_ids=list(body.get("ssh_key_ids", [])))

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        """The instance with every field Verda's SDKs read of one (its hardware from its type)."""
        status = {"running": "running", "exited": "offline"}.get(machine.state, "provisioning")
        kind = next((t for t in TYPES if t["instance_type"] == machine.kind), TYPES[0])
        return {
            "id": machine.id, "hostname": machine.name, "description": machine.name, "status": status,
            "ip": machine.address if machine.state == "running" else None, "instance_type": machine.kind,
            "price_per_hour": machine.price, "is_spot": machine.spot, "location": machine.region or "FIN-01",
            "image": machine.image, "ssh_key_ids": machine.extra.get("key_ids", []), "os_volume_id": None,
            "startup_script_id": None, **{k: kind[k] for k in ("cpu", "gpu", "memory", "gpu_memory", "storage")},
            "created_at": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).isoformat(),
        }
