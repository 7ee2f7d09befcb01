"""A local Verda (DataCrunch): ``POST /v1/oauth2/token`` (client credentials),
``GET /v1/instance-types``, ``GET /v1/instance-availability``, ``/v1/sshkeys``,
``POST/GET /v1/instances``, ``GET /v1/instances/{id}`` and ``PUT /v1/instances``
(``action: delete``), in Verda's shapes. A request with a query parameter or a body field
these operations do not declare is refused (400 ``invalid_request``, naming it)."""

from __future__ import annotations

import datetime
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

CLIENT_ID, CLIENT_SECRET = "client-id", "client-secret"
TYPES = [
    {"id": "t1", "instance_type": "CPU.4V.16G", "price_per_hour": "0.0845", "spot_price": "0.0300",
     "cpu": {"description": "4 CPU", "number_of_cores": 4}, "gpu": {"description": "", "number_of_gpus": 0},
     "memory": {"size_in_gigabytes": 16}, "gpu_memory": {"size_in_gigabytes": 0}},
    {"id": "t2", "instance_type": "1L40S.20V", "price_per_hour": "0.91", "spot_price": "0.30",
     "cpu": {"description": "20 CPU", "number_of_cores": 20}, "gpu": {"description": "1x L40S 48GB", "number_of_gpus": 1},
     "memory": {"size_in_gigabytes": 60}, "gpu_memory": {"size_in_gigabytes": 48}},
    {"id": "t3", "instance_type": "8H100.80S.176V", "price_per_hour": "21.92", "spot_price": "7.12",
     "cpu": {"description": "176 CPU", "number_of_cores": 176}, "gpu": {"description": "8x H100 SXM5 80GB", "number_of_gpus": 8},
     "memory": {"size_in_gigabytes": 1480}, "gpu_memory": {"size_in_gigabytes": 640}},
    {"id": "t4", "instance_type": "1A100.22V", "price_per_hour": "1.29", "spot_price": "0.45",
     "cpu": {"description": "22 CPU", "number_of_cores": 22}, "gpu": {"description": "1x A100 SXM4 80GB", "number_of_gpus": 1},
     "memory": {"size_in_gigabytes": 120}, "gpu_memory": {"size_in_gigabytes": 80}},
]
AVAILABLE = {"FIN-01": ["CPU.4V.16G", "1L40S.20V", "1A100.22V"], "FIN-02": ["CPU.4V.16G", "8H100.80S.176V"]}
"""What each location has, on demand and spot alike."""
VOLUME = shape("name", "size", "type", "on_spot_discontinue")
OPERATIONS = (
    Operation("POST", "/oauth2/token", body=shape("grant_type", "client_id", "client_secret", "refresh_token")),
    Operation("GET", "/instance-types"),
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
ERROR_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}


class FakeVerda(FakeCloud):
    name = "verda"
    prefix = "/v1"
    credentials = {"VERDA_CLIENT_ID": CLIENT_ID, "VERDA_CLIENT_SECRET": CLIENT_SECRET}
    operations = OPERATIONS

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"code": ERROR_CODES.get(status, "error"), "message": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(400, {"code": "insufficient_resources", "message": "Not enough resources available for this instance type"})

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
                return key_id
            return list(self.keys.values())
        if path.startswith("/sshkeys/") and method == "DELETE":
            if self.keys.pop(path.removeprefix("/sshkeys/"), None) is None:
                raise Answer(404, {"code": "not_found", "message": "SSH key not found"})
            return None
        if path == "/instances":
            if method == "POST":
                return self._create(body).id
            if method == "PUT":
                assert body["action"] == "delete"
                for machine_id in body["id"]:
                    self.delete(machine_id)
                return None
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
        return self.add(body["hostname"], kind["instance_type"], spot, body["image"], keys[0], price, region=body["location_code"])

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        status = {"running": "running", "exited": "offline"}.get(machine.state, "provisioning")
        return {
            "id": machine.id, "hostname": machine.name, "description": machine.name, "status": status,
            "ip": machine.address if machine.state == "running" else None, "instance_type": machine.kind,
            "price_per_hour": machine.price, "is_spot": machine.spot, "location": machine.region,
            "image": machine.image,
            "created_at": datetime.datetime.fromtimestamp(machine.created, datetime.timezone.utc).isoformat(),
        }
