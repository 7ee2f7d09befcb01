"""A local JarvisLabs backend, the REST API its ``jl`` CLI and ``jarvislabs`` SDK call:
``GET misc/server_meta``, ``GET/POST ssh/``, ``DELETE ssh/{key_id}``, ``POST
templates/{template}/create``, ``GET users/fetch`` and ``users/fetch/{machine_id}``,
``POST misc/destroy`` (containers) and ``templates/vm/destroy`` (VMs) with
``machine_id``, in the SDK's shapes (the Bearer token, ``{"success", ...}`` answers, an
instance's ``ssh_str``). One server stands for every region's backend. An instance takes
the account's SSH keys as they are when it is created (its host accepts them all); a
create asking for more GPUs than the region has free, spot where none is sold, or a VM
on an account without keys is refused as the SDK's checks describe; a request with a
query parameter or a body field these operations do not declare is refused (422, naming
it). The host reached is the instance's own, on port 22 (the real service gives a shared
host and a port)."""

from __future__ import annotations

import re
import uuid
from typing import Any

from cloud.fake_cloud import Answer, FakeCloud, FakeMachine, Operation, shape


def _gpu(gpu: str, region: str, price: float, spot: float | None, free: int, vram: int, cpus: int, ram: int,
         workload: str = "container") -> dict[str, Any]:
    return {
        "gpu_type": gpu, "region": region, "price_per_hour": price, "spot_price": spot, "num_free_devices": free,
        "effective_num_free_devices": free, "vram": f"{vram}GB", "arc": "x86_64", "cpus_per_gpu": cpus,
        "ram_per_gpu": ram, "workload_type": workload,
    }


SERVER_META = [
    _gpu("RTX5000", "india-chennai-01", 0.39, None, 4, 16, 7, 32),
    _gpu("A5000", "india-chennai-01", 0.49, 0.29, 8, 24, 7, 32),
    _gpu("A100", "india-chennai-01", 1.29, 0.79, 1, 40, 7, 32),
    _gpu("A100-80GB", "india-chennai-01", 1.49, 0.99, 2, 80, 7, 32),
    _gpu("L4", "india-noida-01", 0.44, None, 4, 24, 8, 32),
    _gpu("A6000", "india-noida-01", 0.79, 0.49, 2, 48, 7, 32),
    _gpu("A6000", "india-noida-01", 0.89, None, 2, 48, 7, 32, workload="vm"),
    _gpu("H100", "europe-01", 2.69, None, 8, 80, 16, 200),
]
TEMPLATES = ("pytorch", "tensorflow", "vm")
STATUS = {"booting": "Creating", "running": "Running", "exited": "Paused"}
NAME = re.compile(r"^[a-zA-Z0-9 _-]{1,40}$")
OPERATIONS = (
    Operation("GET", "/misc/server_meta"),
    Operation("GET", "/ssh/"),
    Operation("POST", "/ssh/", body=shape("ssh_key", "key_name")),
    Operation("DELETE", "/ssh/{key_id}"),
    Operation("POST", "/templates/{template}/create", body=shape(
        "gpu_type", "num_gpus", "hdd", "region", "name", "is_spot", "duration", "disk_type", "http_ports",
        "script_id", "script_args", "fs_id", "arguments",
    )),
    Operation("GET", "/users/fetch"),
    Operation("GET", "/users/fetch/{machine_id}"),
    Operation("POST", "/misc/destroy", ("machine_id",)),
    Operation("POST", "/templates/vm/destroy", ("machine_id",)),
)
"""The operations of JarvisLabs' backend the fake serves, with the fields its SDK sends."""


def _fail(status: int, text: str) -> Answer:
    return Answer(status, {"success": False, "message": text})


class FakeJarvisLabs(FakeCloud):
    name = "jarvislabs"
    credentials = {"JL_API_KEY": "test-token"}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "jarvislabs"
    invalid_status = 422
    vm_user = "root"
    """Who a VM's ``ssh_str`` names (containers: root)."""

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, text)

    def no_capacity(self, kind: str) -> Answer:
        return _fail(400, f"No free {kind} GPUs right now. Try again later.")

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/misc/server_meta"):
            return {"server_meta": SERVER_META, "cpu_meta": {"combinations": []}}
        if path == "/ssh/":
            if method == "POST":
                return self._add_key(body or {})
            return [{"ssh_key": k["ssh_key"], "key_name": k["name"], "key_id": i, "user_id": "u1"}
                    for i, k in self.keys.items()]
        if path.startswith("/ssh/") and method == "DELETE":
            if self.keys.pop(path.removeprefix("/ssh/"), None) is None:
                raise _fail(404, "SSH key not found")
            return {"success": True}
        found = re.fullmatch(r"/templates/([^/]+)/create", path)
        if found and method == "POST":
            return {"success": True, "machine_id": int(self._create(found.group(1), body or {}).id)}
        if (method, path) == ("GET", "/users/fetch"):
            return {"success": True, "instances": [self._view(m) for m in self.live()]}
        if method == "GET" and path.startswith("/users/fetch/"):
            machine = self._machine(path.removeprefix("/users/fetch/"))
            return {"success": True, "instance": self._view(machine)}
        if method == "POST" and path in ("/misc/destroy", "/templates/vm/destroy"):
            machine = self._machine(query.get("machine_id", ""))
            if (machine.extra.get("template") == "vm") != (path == "/templates/vm/destroy"):
                raise _fail(400, f"instance {machine.id} is not destroyed through {path}")
            self.delete(machine.id)
            return {"success": True}
        raise self.no_route(method, path)

    def _add_key(self, body: dict[str, Any]) -> dict[str, Any]:
        if not str(body.get("ssh_key", "")).startswith("ssh-") or not body.get("key_name"):
            raise _fail(400, "Invalid SSH key")
        with self.lock:
            self.keys[uuid.uuid4().hex] = {"name": body["key_name"], "ssh_key": body["ssh_key"]}
        return {"success": True}

    def _create(self, template: str, body: dict[str, Any]) -> FakeMachine:
        if template not in TEMPLATES:
            raise _fail(400, f"unknown template {template}")
        workload = "vm" if template == "vm" else "container"
        gpu, region, count = body.get("gpu_type"), body.get("region"), body.get("num_gpus")
        meta = next((m for m in SERVER_META if (m["gpu_type"], m["region"], m["workload_type"]) == (gpu, region, workload)),
                    None)
        if meta is None:
            raise _fail(400, f"{gpu} is not available in {region} for {workload} instances")
        if not isinstance(count, int) or count < 1 or (region == "europe-01" and count not in (1, 8)):
            raise _fail(400, f"invalid num_gpus {count!r}")
        if count > meta["num_free_devices"]:
            raise self.no_capacity(str(gpu))
        if body.get("is_spot") and (meta["spot_price"] is None or template == "vm"):
            raise _fail(400, f"Spot is not available for {gpu} right now.")
        if not NAME.match(str(body.get("name", ""))) or not isinstance(body.get("hdd"), int) or body["hdd"] < 20:
            raise _fail(422, "invalid name or hdd")
        if body.get("duration") != "hour":
            raise _fail(422, "duration must be 'hour'")
        keys = [k["ssh_key"] for k in self.keys.values()]
        if template == "vm" and not keys:
            raise _fail(400, "VM instances require at least one SSH key")
        price = (meta["spot_price"] if body.get("is_spot") else meta["price_per_hour"]) * count
        return self.add(body["name"], f"{count}x {gpu}", bool(body.get("is_spot")), template, "\n".join(keys), price,
                        region=region, template=template, gpu_type=gpu, num_gpus=count, hdd=body["hdd"], create=body)

    def _machine(self, machine_id: str) -> FakeMachine:
        machine = self.machines.get(machine_id)
        if machine is None or machine.state == "deleted":
            raise _fail(404, f"Instance {machine_id} not found")
        return machine

    def _user(self, machine: FakeMachine) -> str:
        return self.vm_user if machine.extra.get("template") == "vm" else "root"

    def _view(self, machine: FakeMachine) -> dict[str, Any]:
        running = machine.state == "running"
        return {
            "machine_id": int(machine.id),
            "name": machine.name,
            "status": STATUS.get(machine.state, "Running"),
            "ssh_str": f"ssh -p 22 {self._user(machine)}@{machine.address}" if running else None,
            "public_ip": machine.address if running else None,
            "gpu_type": machine.extra.get("gpu_type", machine.kind),
            "num_gpus": machine.extra.get("num_gpus", 1),
            "region": machine.region or "india-chennai-01",
            "template": machine.extra.get("template", "pytorch"),
            "is_spot": machine.spot,
            "cost": round(machine.price, 4),
            "hdd": machine.extra.get("hdd", 40),
        }
