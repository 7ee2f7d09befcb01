"""A local Vast.ai: ``POST /api/v0/bundles/`` (asks), ``PUT /api/v0/asks/{id}/`` (an ask
rented once, then 410 ``no_such_ask``), ``POST /api/v0/instances/{id}/ssh/``,
``GET/DELETE /api/v0/instances/{id}/`` and ``GET /api/v1/instances/`` (25 a page, the next
after ``next_token``), in the shapes of Vast.ai's OpenAPI document (pinned under
``tests/cloud/descriptions/vastai``). A request with a query parameter or a body field
these operations do not declare is refused (400 ``invalid_args``, naming it)."""

from __future__ import annotations

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

SEARCH = (
    "limit", "type", "verified", "rentable", "rented", "gpu_name", "reliability", "num_gpus", "gpu_ram", "duration",
    "machine_id", "dlperf_per_dphtotal", "dph_total", "flops_per_dphtotal", "geolocation", "gpu_arch", "dlperf",
    "cuda_max_good", "inet_down", "inet_up", "inet_down_cost", "inet_up_cost", "driver_version", "compute_cap",
    "cpu_arch", "has_avx", "cpu_cores", "cpu_cores_effective", "cpu_ghz", "cpu_ram", "datacenter", "external",
    "disk_bw", "disk_space", "bw_nvlink", "gpu_max_power", "gpu_max_temp", "gpu_mem_bw", "gpu_total_ram", "gpu_frac",
    "gpu_display_active", "direct_port_count", "host_id", "id", "min_bid", "mobo_name", "pci_gen", "pcie_bw",
    "storage_cost", "static_ip", "total_flops", "os_version", "ubuntu_version", "verification", "vms_enabled", "order",
    "allocated_storage",
)
"""The fields of a search (``POST /bundles/``): filters, ``order``, ``limit``, ``type``."""
PAGE = 25
OPERATIONS = (
    Operation("POST", "/bundles/", body=shape(*SEARCH)),
    Operation("PUT", "/asks/{id}/", body=shape(
        "image", "template_hash_id", "label", "disk", "runtype", "target_state", "price", "env", "cancel_unavail",
        "vm", "onstart", "args", "args_str", "use_jupyter_lab", "jupyter_dir", "python_utf8", "lang_utf8", "force",
        "user", "image_login", "volume_info",
    )),
    Operation("POST", "/instances/{id}/ssh/", body=shape("ssh_key")),
    Operation("GET", "/instances/{id}/"),
    Operation("DELETE", "/instances/{id}/"),
    Operation("GET", "/api/v1/instances/", ("limit", "after_token", "order_by", "select_cols", "select_filters")),
)
"""The operations of Vast.ai's API v0 the fake serves, with the fields it documents."""
ERRORS = {400: "invalid_args", 404: "not_found", 405: "method_not_allowed"}


class FakeVastAI(FakeCloud):
    name = "vastai"
    prefix = "/api/v0"
    credentials = {"VAST_API_KEY": TOKEN}
    operations = OPERATIONS
    pinned = "vastai"

    def __init__(self) -> None:
        super().__init__()
        self.rented: dict[int, str] = {}

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"success": False, "error": ERRORS.get(status, "error"), "msg": text})

    def no_capacity(self, kind: str) -> Answer:
        return Answer(410, {"success": False, "error": "no_such_ask",
                            "msg": "error 410/3907: no_such_ask Instance type is no longer available."})

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        parts = [p for p in path.split("/") if p]
        if (method, parts) == ("POST", ["bundles"]):
            if (body or {}).get("rentable", {"eq": True}) != {"eq": True}:
                raise self.error(400, "only rentable offers are searched here")
            return {"offers": [a for a in ASKS if a["id"] not in self.rented]}
        if (method, parts) == ("GET", ["api", "v1", "instances"]):
            return self._page(query)
        if method == "PUT" and parts[:1] == ["asks"]:
            return self._rent(int(parts[1]), body)
        if parts[:1] == ["instances"] and len(parts) >= 2:
            machine = self.machines.get(parts[1])
            if machine is None or machine.state == "deleted":
                if method == "GET":
                    return {"instances": {}}
                raise Answer(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
            if method == "POST" and parts[2:] == ["ssh"]:
                with self.lock:
                    machine.public_key = body["ssh_key"]
                    machine.state = "booting" if machine.state == "pending" else machine.state
                return {"success": True, "msg": "SSH key attached successfully"}
            if method == "DELETE":
                self.delete(machine.id)
                return {"success": True, "msg": "Instance destroyed successfully"}
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
        if not body.get("image"):
            raise Answer(400, {"success": False, "error": "invalid_args", "msg": "image is required"})
        spot = "price" in body
        machine = self.add(
            body.get("label", ""), f"{ask['num_gpus']}x {ask['gpu_name']}", spot, body["image"], "",
            float(body["price"]) if spot else ask["dph_total"], ask=ask,
        )
        machine.state = "pending"  # until the key is attached
        self.rented[ask_id] = machine.id
        return {"success": True, "new_contract": int(machine.id)}

    def _page(self, query: dict[str, str]) -> dict[str, Any]:
        """A page of the v1 list: at most ``limit`` (25) instances by id, after ``after_token``."""
        limit = min(int(query.get("limit", PAGE)), PAGE)
        limit = 5 if limit <= 0 else limit
        after = int(query.get("after_token") or 0)
        every = sorted(self.live(), key=lambda m: int(m.id))
        shown = [m for m in every if int(m.id) > after][:limit]
        more = bool(shown) and int(shown[-1].id) < int(every[-1].id)
        return {"success": True, "instances_found": len(shown), "total_instances": len(every),
                "next_token": shown[-1].id if more else None, "instances": [self._instance(m) for m in shown]}

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        """An instance as Vast.ai shows it: the addresses (typed text and integer, never
        null) only once it runs, its ports as Docker's port map (null before)."""
        up = machine.state == "running"
        ask = machine.extra.get("ask", ASKS[0])
        status = {"exited": "exited", "running": "running"}.get(machine.state, "loading")
        reached = {"public_ipaddr": machine.address, "ssh_host": machine.address, "ssh_port": 22} if up else {}
        return {
            "id": int(machine.id), "label": machine.name, "actual_status": status, "intended_status": "running",
            **reached, "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "22"}]} if up else None,
            "dph_total": machine.price, "is_bid": machine.spot, "num_gpus": ask["num_gpus"], "gpu_name": ask["gpu_name"],
            "start_date": machine.created, "image_uuid": machine.image,
        }
