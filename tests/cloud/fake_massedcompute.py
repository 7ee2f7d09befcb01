"""A local Massed Compute VM API v1 (``/api/v1``): ``GET /gpu-inventory``, ``GET
/images``, ``GET/POST /ssh-keys``, ``DELETE /ssh-keys/{id}``, ``POST /instance/launch``,
``GET /instance`` and ``/instance/{uuid}``, ``POST /instance/terminate``, in the shapes
of its OpenAPI document, pinned in ``descriptions/massedcompute`` (``gpu_inventory``
keyed by product, images by ``vm_image_id``, ``runningInstances``, ``runningInstance``
with its product's ``price_hr`` in dollars, the launch's 202 ``{"response": uuid}``,
``sshKeys`` listed with ``public_key``, the Bearer key). Not documented there, so chosen
here: errors ``{"error": text}``, and a product in a region without capacity is refused
with "Insufficient capacity". A request with a query parameter or a body field these
operations do not declare is refused (400, naming it). A VM's host accepts the keys
named at launch; the startup command is recorded, not run."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape


def _product(name: str, description: str, cents: int, vcpus: int, memory: int, storage: int,
             regions: list[str]) -> dict[str, Any]:
    return {
        "instance_type": {
            "name": name, "description": description, "price_cents_per_hour": cents,
            "specs": {"vcpu_count": vcpus, "memory_gib": memory, "storage_gb": storage},
        },
        "regions_with_capacity_available": [{"name": r, "description": r.title()} for r in regions],
        "capacity_available": 4 if regions else 0,
    }


INVENTORY = {
    p["instance_type"]["name"]: p
    for p in (
        _product("gpu_1x_a6000", "1x RTX A6000 (48 GB)", 62, 6, 48, 256, ["us-central-3"]),
        _product("gpu_2x_a6000", "2x RTX A6000 (48 GB)", 124, 12, 96, 512, ["us-central-3"]),
        _product("gpu_1x_l40s", "1x L40S (48 GB)", 103, 8, 64, 512, ["us-central-2", "us-central-3"]),
        _product("gpu_1x_a100_80gb", "1x A100 (80 GB PCIe)", 172, 12, 96, 1024, ["us-central-2"]),
        _product("gpu_1x_h100", "1x H100 (80 GB PCIe)", 235, 20, 128, 1024, []),
        _product("gpu_8x_h100", "8x H100 (80 GB SXM5)", 1880, 160, 1024, 8192, ["us-central-1"]),
    )
}
IMAGES = [
    {"vm_image_id": 7, "vm_image_name": "Art", "vm_image_description": "AI tools for artists"},
    {"vm_image_id": 12, "vm_image_name": "Ubuntu 22.04 Base", "vm_image_description": "Ubuntu with NVIDIA drivers"},
    {"vm_image_id": 15, "vm_image_name": "Ubuntu 24.04 Base", "vm_image_description": "Ubuntu with NVIDIA drivers"},
]
STATUS = {"booting": "provisioning", "running": "rented", "exited": "stopped"}
OPERATIONS = (
    Operation("GET", "/gpu-inventory"),
    Operation("GET", "/images"),
    Operation("GET", "/ssh-keys"),
    Operation("POST", "/ssh-keys", body=shape("name", "publicKey")),
    Operation("DELETE", "/ssh-keys/{id}"),
    Operation("POST", "/instance/launch", body=shape(
        "imageId", "productName", "regionName", "instanceName", "command", "sshKeys",
    )),
    Operation("GET", "/instance"),
    Operation("GET", "/instance/{uuid}"),
    Operation("POST", "/instance/terminate", body=shape("instanceUuids")),
)
"""The operations of Massed Compute's API v1 the fake serves, with the fields it documents."""


def _fail(status: int, text: str) -> Answer:
    return Answer(status, {"error": text})


class FakeMassedCompute(FakeCloud):
    name = "massed_compute"
    prefix = "/api/v1"
    credentials = {"MASSED_COMPUTE_API_KEY": TOKEN}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "massedcompute"

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, text)

    def success(self, method: str, path: str) -> int:
        """A launch and a termination are accepted (202), as the OpenAPI document says."""
        return 202 if (method, path) in (("POST", "/instance/launch"), ("POST", "/instance/terminate")) else 200

    def no_capacity(self, kind: str) -> Answer:
        return _fail(400, f"Insufficient capacity for {kind} in the selected region")

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/gpu-inventory"):
            return {"gpu_inventory": INVENTORY}
        if (method, path) == ("GET", "/images"):
            return {"images": IMAGES}
        if path == "/ssh-keys":
            if method == "POST":
                made = self._add_key(body or {})
                return {"sshKey": {"id": made["id"], "name": made["name"]}}
            return {"sshKeys": [{"id": i, "name": k["name"], "public_key": k["publicKey"]} for i, k in self.keys.items()]}
        if path.startswith("/ssh-keys/") and method == "DELETE":
            if self.keys.pop(path.removeprefix("/ssh-keys/"), None) is None:
                raise _fail(404, "SSH key not found")
            return {"result": {}}
        if (method, path) == ("POST", "/instance/launch"):
            return {"response": self._launch(body or {}).id}
        if (method, path) == ("GET", "/instance"):
            return {"runningInstances": [self._view(m) for m in self.live()]}
        if method == "GET" and path.startswith("/instance/"):
            machine = self.machines.get(path.removeprefix("/instance/"))
            if machine is None or machine.state == "deleted":
                raise _fail(404, "Instance not found")
            return {"runningInstance": self._view(machine)}
        if (method, path) == ("POST", "/instance/terminate"):
            ids = (body or {}).get("instanceUuids")
            if not isinstance(ids, list) or not ids:
                raise _fail(400, "instanceUuids is required")
            ended = [self.machines[str(i)] for i in ids if self.delete(str(i))]
            if not ended:
                raise _fail(404, "Instance not found")
            return {"response": {"data": {"terminated_instances": [
                {"id": m.id, "name": m.name, "status": "terminated"} for m in ended]}}}
        raise self.no_route(method, path)

    def _add_key(self, body: dict[str, Any]) -> dict[str, Any]:
        if not str(body.get("publicKey", "")).startswith("ssh-") or not body.get("name"):
            raise _fail(400, "name and an OpenSSH publicKey are required")
        key = {"id": str(uuid.uuid4()), "name": body["name"], "publicKey": body["publicKey"]}
        with self.lock:
            self.keys[key["id"]] = key
        return key

    def _launch(self, body: dict[str, Any]) -> FakeMachine:
        product = INVENTORY.get(str(body.get("productName")))
        if product is None:
            raise _fail(400, f"unknown productName {body.get('productName')!r}")
        if body.get("imageId") not in [i["vm_image_id"] for i in IMAGES]:
            raise _fail(400, f"unknown imageId {body.get('imageId')!r}")
        regions = [r["name"] for r in product["regions_with_capacity_available"]]
        region = body.get("regionName")
        if region != "any" and region not in regions or not regions:
            raise self.no_capacity(product["instance_type"]["name"])
        named = body.get("sshKeys") or []
        keys = [k["publicKey"] for k in self.keys.values() if k["name"] in named]
        if not isinstance(named, list) or len(keys) != len(named):
            raise _fail(400, f"unknown SSH key in {named!r}")
        if not isinstance(body.get("command", ""), str) or not body.get("instanceName"):
            raise _fail(400, "instanceName and a string command are required")
        kind = product["instance_type"]
        return self.add(body["instanceName"], kind["name"], False, str(body["imageId"]), "\n".join(keys),
                        kind["price_cents_per_hour"] / 100, region=regions[0] if region == "any" else region,
                        command=body.get("command", ""), launch=body)

    def _view(self, machine: FakeMachine) -> dict[str, Any]:
        running = machine.state == "running"
        kind = INVENTORY.get(machine.kind, {}).get("instance_type", {})
        image = next((i for i in IMAGES if str(i["vm_image_id"]) == machine.image), None)
        return {
            "uuid": machine.id,
            "name": machine.name,
            "ip": machine.address if running else "",
            "username": "ubuntu",
            "password": "redacted",
            "status": STATUS.get(machine.state, "rented"),
            "os_booted": 1 if running else 0,
            "command_startup": machine.extra.get("command", ""),
            "created": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "active": 1,
            "image": {"id": image["vm_image_id"], "name": image["vm_image_name"],
                      "description": image["vm_image_description"]} if image else {"id": 0, "name": machine.image},
            "product": {"name": machine.kind, "description": kind.get("description", ""),
                        "price_hr": f"{kind.get('price_cents_per_hour', 50) / 100:.6f}", "final_price_hr": "0.000000"},
        }
