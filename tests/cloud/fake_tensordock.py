"""A local TensorDock v2 API (``/api/v2``): ``GET /locations``, ``POST/GET /instances``,
``GET/DELETE /instances/{id}``, in the shapes of TensorDock's v2 documentation pages,
pinned in ``descriptions/tensordock`` (the ``data`` envelope; a listed instance's
``attributes`` only its ``name`` and ``status``; a flat instance from the get with its
``ipAddress`` and ``portForwards`` as ``{internal_port, external_port}``, and no price or
resources; a Bearer token). A create is checked as TensorDock
checks it (JSON:API body, a known location and GPU within its ``max_count``, at least
100 GB of disk, ``ssh_key`` xor ``ssh_key_id``); a request with a query parameter or a
body field these operations do not declare is refused (400, naming it). A lab host
listens on port 22 at its own address, which the fake reports with 22 forwarded to 22;
with ``forwarding`` set, a machine is reported as TensorDock's hosts show one: at the
shared address 127.0.0.1 on a port of its own, forwarded to the host's port 22
(``tests/cloud/forward.py``)."""

from __future__ import annotations

from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, keyed, shape
from cloud.forward import Forward


def _gpu(
    v0_name: str, display: str, count: int, price: float, vcpus: int, ram: int
) -> dict[str, Any]:
    return {
        "v0Name": v0_name,
        "displayName": display,
        "max_count": count,
        "price_per_hr": price,
        "resources": {"max_vcpus": vcpus, "max_ram_gb": ram, "max_storage_gb": 1000},
        "pricing": {"per_vcpu_hr": 0.003, "per_gb_ram_hr": 0.002, "per_gb_storage_hr": 0.00005},
        "network_features": {
            "dedicated_ip_available": False,
            "port_forwarding_available": True,
            "network_storage_available": False,
        },
    }


LOCATIONS = [
    {
        "id": "8f2b1d4e-austin",
        "city": "Austin",
        "stateprovince": "Texas",
        "country": "United States",
        "tier": 3,
        "gpus": [
            _gpu("geforcertx4090-pcie-24gb", "NVIDIA GeForce RTX 4090 PCIe 24GB", 2, 0.35, 32, 128),
            _gpu("h100-sxm5-80gb", "H100 SXM5 80GB", 8, 2.2, 128, 300),
            _gpu("a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", 4, 1.1, 64, 256),
        ],
    },
    {
        "id": "3c9a7e10-helsinki",
        "city": "Helsinki",
        "stateprovince": "Uusimaa",
        "country": "Finland",
        "tier": 2,
        "gpus": [
            _gpu("geforcertx4090-pcie-24gb", "NVIDIA GeForce RTX 4090 PCIe 24GB", 1, 0.40, 16, 64),
            {
                **_gpu("rtxa6000-pcie-48gb", "NVIDIA RTX A6000 PCIe 48GB", 1, 0.45, 16, 64),
                "network_features": {
                    "dedicated_ip_available": True,
                    "port_forwarding_available": False,
                    "network_storage_available": False,
                },
            },
        ],
    },
]


ATTRIBUTES = shape(
    "name", "type", "image", "hostnode_id", "location_id", "useDedicatedIp", "ssh_key", "ssh_key_id",
    resources=shape("vcpu_count", "ram_gb", "storage_gb", gpus=keyed(shape("count"))),
    port_forwards=shape("internal_port", "external_port"),
    cloud_init=shape(
        "runcmd", "packages", "package_update", "package_upgrade",
        write_files=shape("path", "content"),
    ),
)
"""A new virtual machine's attributes (JSON:API ``data.attributes``)."""
OPERATIONS = (
    Operation("GET", "/locations"),
    Operation("GET", "/instances"),
    Operation("POST", "/instances", body=shape(data=shape("type", attributes=ATTRIBUTES))),
    Operation("GET", "/instances/{id}"),
    Operation("DELETE", "/instances/{id}"),
)
"""The operations of TensorDock's API v2 the fake serves, with the fields it documents."""


class FakeTensorDock(FakeCloud):
    name = "tensordock"
    prefix = "/api/v2"
    credentials = {"TENSORDOCK_API_TOKEN": TOKEN}
    operations = OPERATIONS
    pinned = "tensordock"

    def __init__(self) -> None:
        super().__init__()
        self.forwarding = False
        self.forwards: dict[str, Forward] = {}

    def started(self, machine_id: str) -> None:
        machine = self.machines[machine_id]
        if self.forwarding and machine.address and machine_id not in self.forwards:
            self.forwards[machine_id] = Forward((machine.address, 22))
        super().started(machine_id)

    def delete(self, machine_id: str) -> bool:
        forward = self.forwards.pop(machine_id, None)
        if forward is not None:
            forward.close()
        return super().delete(machine_id)

    def stop(self) -> None:
        for forward in self.forwards.values():
            forward.close()
        super().stop()

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"error": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(
            400, {"error": "No available hostnodes with the requested resources in this location"}
        )

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        parts = [p for p in path.split("/") if p]
        if (method, parts) == ("GET", ["locations"]):
            return {"data": {"locations": LOCATIONS}}
        if (method, parts) == ("POST", ["instances"]):
            machine = self._create(body)
            return {
                "data": {
                    "type": "virtualmachine",
                    "id": machine.id,
                    "name": machine.name,
                    "status": "running",
                }
            }
        if (method, parts) == ("GET", ["instances"]):
            return {
                "data": {
                    "instances": [
                        {"type": "VM", "id": m.id, "attributes": {"name": m.name, "status": self._status(m)}}
                        for m in self.live()
                    ]
                }
            }
        if parts[:1] == ["instances"] and len(parts) == 2:
            machine = self.machines.get(parts[1])
            if machine is None or machine.state == "deleted":
                raise Answer(404, {"error": "Instance not found"})
            if method == "DELETE":
                self.delete(machine.id)
                return {
                    "data": {
                        "type": "success",
                        "attributes": {"message": "Instance deleted successfully"},
                    }
                }
            return {"type": "instance", "id": machine.id, **self._instance(machine)}
        raise self.no_route(method, path)

    def _create(self, body: Any) -> FakeMachine:
        data = (body or {}).get("data") or {}
        attributes = data.get("attributes") or {}
        if data.get("type") != "virtualmachine" or attributes.get("type") != "virtualmachine":
            raise Answer(
                400, {"error": "data.type and data.attributes.type must be virtualmachine"}
            )
        for name in ("name", "image", "resources", "location_id"):
            if not attributes.get(name):
                raise Answer(400, {"error": f"Missing required field: {name}"})
        if bool(attributes.get("ssh_key")) == bool(attributes.get("ssh_key_id")):
            raise Answer(400, {"error": "Provide either ssh_key or ssh_key_id, not both"})
        location = next((loc for loc in LOCATIONS if loc["id"] == attributes["location_id"]), None)
        if location is None:
            raise Answer(404, {"error": "Location not found"})
        resources = attributes["resources"]
        if int(resources.get("storage_gb") or 0) < 100:
            raise Answer(400, {"error": "Minimum storage is 100GB"})
        [(v0_name, wanted)] = resources["gpus"].items()
        gpu = next((g for g in location["gpus"] if g["v0Name"] == v0_name), None)
        count = int(wanted["count"])
        if (
            gpu is None
            or count > gpu["max_count"]
            or resources["vcpu_count"] > gpu["resources"]["max_vcpus"]
        ):
            raise self.no_capacity(v0_name)
        forwards = attributes.get("port_forwards") or []
        if not any(f.get("internal_port") == 22 for f in forwards):
            raise Answer(
                400, {"error": "port_forwards must forward port 22 (or use useDedicatedIp)"}
            )
        rates = gpu["pricing"]
        price = (
            gpu["price_per_hr"] * count
            + rates["per_vcpu_hr"] * resources["vcpu_count"]
            + rates["per_gb_ram_hr"] * resources["ram_gb"]
            + rates["per_gb_storage_hr"] * resources["storage_gb"]
        )
        return self.add(
            attributes["name"],
            v0_name,
            False,
            attributes["image"],
            attributes["ssh_key"],
            round(price, 6),
            region=location["id"],
            resources=resources,
            forwards=forwards,
            cloud_init=attributes.get("cloud_init"),
        )

    def _status(self, machine: FakeMachine) -> str:
        return {"running": "running", "exited": "stopped", "deleted": "deleted"}.get(
            machine.state, "starting"
        )

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        """An instance as ``GET /instances/{id}`` shows it (the documented fields only: no
        price, resources, location or image; its address once it is up)."""
        up = machine.state == "running"
        forward = self.forwards.get(machine.id)
        forwards = [
            {
                "internal_port": f["internal_port"],
                "external_port": forward.port
                if forward and f["internal_port"] == 22
                else f["internal_port"],
            }
            for f in machine.extra.get("forwards", [])
        ]
        address = "127.0.0.1" if forward else machine.address
        shown: dict[str, Any] = {"name": machine.name, "status": self._status(machine)}
        if up and address:
            shown["ipAddress"] = address
        shown["portForwards"] = forwards if up else []
        return shown
