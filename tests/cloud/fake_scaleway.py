"""A local Scaleway Instance API v1 (``/instance/v1/zones/{zone}``): ``GET
/products/servers`` and ``/products/servers/availability``, ``POST/GET /servers``,
``GET/DELETE /servers/{id}``, ``PATCH /servers/{id}/user_data/cloud-init``, ``POST
/servers/{id}/action`` (poweron, poweroff, terminate), ``DELETE /volumes/{id}``,
``POST/GET /security_groups``, ``POST /security_groups/{id}/rules``, ``DELETE
/security_groups/{id}/rules/{rule}`` and ``DELETE /security_groups/{id}``, in Scaleway's
shapes (``X-Auth-Token``, ``page``/``per_page`` pages, errors as ``{"type", "message"}``,
RAM and GPU memory in bytes). A listing by ``tags`` holds only the servers that carry
them all, one by ``project`` only that project's. A request with a query parameter or a
body field these operations do not declare is refused (400 ``invalid_arguments``, naming
it). A server is created stopped and starts on ``poweron``; the
host it becomes accepts the key of its ``AUTHORIZED_KEY=`` tag; a server that runs cannot
be deleted (it is terminated), one that is stopped leaves its volumes behind when deleted.
A security group is refused deletion while a server is in it. Rules are recorded, not
enforced (the lab's hosts share one bridge)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, keyed, shape

PROJECT = "6f4f7c1e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
ZONES = ("fr-par-1", "fr-par-2")
GIB = 2**30
IMAGES = ("ubuntu_noble", "ubuntu_noble_gpu_os_12", "ubuntu_jammy")
KEY_TAG = "AUTHORIZED_KEY="


def _product(cpus: int, ram_gib: int, price: float, gpus: int = 0, gpu: str = "", gpu_gib: int = 0,
             arch: str = "x86_64") -> dict[str, Any]:
    product: dict[str, Any] = {
        "ncpus": cpus, "ram": ram_gib * GIB, "arch": arch, "hourly_price": price, "monthly_price": round(price * 730, 2),
        "gpu": gpus, "volumes_constraint": {"min_size": 0, "max_size": 0},
    }
    if gpus:
        product["gpu_info"] = {"gpu_manufacturer": "NVIDIA", "gpu_name": gpu, "gpu_memory": gpu_gib * GIB}
    return product


PRODUCTS = {
    "DEV1-S": _product(2, 2, 0.0088),
    "DEV1-M": _product(3, 4, 0.0198),
    "PRO2-XXS": _product(2, 8, 0.055),
    "COPARM1-2C-8G": _product(2, 8, 0.0426, arch="arm64"),
    "GPU-3070-S": _product(8, 16, 0.98, 1, "RTX-3070", 8),
    "L4-1-24G": _product(8, 48, 0.75, 1, "L4", 24),
    "L4-2-24G": _product(16, 96, 1.5, 2, "L4", 24),
    "L40S-1-48G": _product(8, 96, 1.4, 1, "L40S", 48),
    "H100-1-80G": _product(24, 240, 2.73, 1, "H100", 80),
    "H100-2-80G": _product(48, 480, 5.46, 2, "H100", 80),
}
SHORTAGE = {"H100-2-80G"}
STATE = {"pending": "stopped", "booting": "starting", "running": "running", "exited": "stopped in place"}


ZONE = "/instance/v1/zones/{zone}"
PAGED = ("page", "per_page")
OPERATIONS = (
    Operation("GET", f"{ZONE}/products/servers", PAGED),
    Operation("GET", f"{ZONE}/products/servers/availability"),
    Operation("GET", f"{ZONE}/servers", ("project", "tags", *PAGED)),
    Operation("POST", f"{ZONE}/servers", body=shape(
        "name", "dynamic_ip_required", "routed_ip_enabled", "commercial_type", "image", "enable_ipv6", "public_ip",
        "public_ips", "boot_type", "organization", "project", "tags", "security_group", "placement_group",
        "admin_password_encryption_ssh_key_id", "protected",
        volumes=keyed(shape("name", "id", "size", "volume_type", "base_snapshot", "project", "organization", "boot")),
    )),
    Operation("GET", f"{ZONE}/servers/{{server_id}}"),
    Operation("DELETE", f"{ZONE}/servers/{{server_id}}"),
    Operation("PATCH", f"{ZONE}/servers/{{server_id}}/user_data/{{key}}", body=shape()),  # the text itself
    Operation("POST", f"{ZONE}/servers/{{server_id}}/action", body=shape("action", "name", "volumes", "disable_ipv6")),
    Operation("DELETE", f"{ZONE}/volumes/{{volume_id}}"),
    Operation("GET", f"{ZONE}/security_groups", ("project", *PAGED)),
    Operation("POST", f"{ZONE}/security_groups", body=shape(
        "name", "description", "organization", "project", "tags", "organization_default", "project_default",
        "stateful", "inbound_default_policy", "outbound_default_policy", "enable_default_security",
    )),
    Operation("GET", f"{ZONE}/security_groups/{{security_group_id}}"),
    Operation("DELETE", f"{ZONE}/security_groups/{{security_group_id}}"),
    Operation("POST", f"{ZONE}/security_groups/{{security_group_id}}/rules", body=shape(
        "protocol", "direction", "action", "ip_range", "dest_port_from", "dest_port_to", "position", "editable",
    )),
    Operation("DELETE", f"{ZONE}/security_groups/{{security_group_id}}/rules/{{security_group_rule_id}}"),
)
"""The operations of Scaleway's Instance API v1 the fake serves, with the fields it documents."""
ERROR_TYPES = {400: "invalid_arguments", 404: "not_found", 405: "method_not_allowed"}


def _fail(status: int, kind: str, text: str) -> Answer:
    return Answer(status, {"type": kind, "message": text})


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class FakeScaleway(FakeCloud):
    name = "scaleway"
    credentials = {"SCW_SECRET_KEY": TOKEN, "SCW_DEFAULT_PROJECT_ID": PROJECT}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "scaleway"
    page_limit = 100
    """The most items a page holds; a test lowers it."""

    def __init__(self) -> None:
        super().__init__()
        self.volumes: dict[str, dict[str, Any]] = {}
        self.poweron_refused: set[str] = set()
        """Server types whose ``poweron`` is answered "out of stock" (created, then refused)."""

    def authorized(self, headers: Any) -> bool:
        return headers.get("X-Auth-Token") == TOKEN

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, ERROR_TYPES.get(status, "unknown_error"), text)

    def no_capacity(self, kind: str) -> Answer:
        return _fail(412, "out_of_stock", f"{kind} is out of stock in this zone")

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        prefix = "/instance/v1/zones/"
        zone, _, rest = path.removeprefix(prefix).partition("/")
        if zone not in ZONES:
            raise _fail(400, "invalid_arguments", f"unknown zone {zone}")
        rest = "/" + rest
        sold = PRODUCTS if zone == "fr-par-2" else {k: v for k, v in PRODUCTS.items() if not v["gpu"]}
        if (method, rest) == ("GET", "/products/servers"):
            return {"servers": dict(self._page(list(sold.items()), query))}
        if (method, rest) == ("GET", "/products/servers/availability"):
            return {"servers": {k: {"availability": "shortage" if k in SHORTAGE else "available"} for k in sold}}
        if rest == "/servers":
            if method == "POST":
                raise Answer(201, {"server": self._view(self._create(zone, sold, body or {}))})
            wanted = [t for t in query.get("tags", "").split(",") if t]
            live = [m for m in self.live() if m.region in (zone, None) and all(t in m.extra.get("tags", []) for t in wanted)]
            return {"servers": [self._view(m) for m in self._page(live if self._in_project(query) else [], query)]}
        if rest.startswith("/servers/"):
            return self._on_server(method, rest.removeprefix("/servers/"), body)
        if rest.startswith("/volumes/") and method == "DELETE":
            if self.volumes.pop(rest.removeprefix("/volumes/"), None) is None:
                raise _fail(404, "not_found", "volume not found")
            return None
        if rest == "/security_groups":
            if method == "POST":
                raise Answer(201, {"security_group": self._group(body or {})})
            groups = self._page(list(self.firewalls), query) if self._in_project(query) else []
            return {"security_groups": [self._shown(g) for g in groups]}
        if rest.startswith("/security_groups/"):
            return self._on_group(method, rest.removeprefix("/security_groups/").split("/"), body)
        raise self.no_route(method, path)

    def _in_project(self, query: dict[str, str]) -> bool:
        """Whether a listing's ``project`` (none: every project) is the fake's own, which
        holds every server and security group."""
        return query.get("project", PROJECT) == PROJECT

    def _page(self, items: list[Any], query: dict[str, str]) -> list[Any]:
        size = min(int(query.get("per_page", 50)), self.page_limit, 100)
        start = (int(query.get("page", 1)) - 1) * size
        return items[start:start + size]

    def _create(self, zone: str, sold: dict[str, Any], body: dict[str, Any]) -> FakeMachine:
        kind = str(body.get("commercial_type") or "")
        if kind not in sold:
            raise _fail(400, "invalid_arguments", f"commercial_type {kind!r} is not sold in {zone}")
        if body.get("image") not in IMAGES:
            raise _fail(404, "not_found", f"image {body.get('image')!r} not found")
        if body.get("project") != PROJECT:
            raise _fail(403, "permissions_denied", "project not found or not allowed")
        if body.get("security_group") not in self.firewalls:
            raise _fail(404, "not_found", "security group not found")
        if not body.get("name") or not isinstance(body.get("tags"), list):
            raise _fail(400, "invalid_arguments", "name and tags are required")
        keys = [t.removeprefix(KEY_TAG).replace("_", " ") for t in body["tags"] if str(t).startswith(KEY_TAG)]
        volume = str(uuid.uuid4())
        machine = self.add(
            body["name"], kind, False, body["image"], keys[0] if keys else "", sold[kind]["hourly_price"], region=zone,
            tags=list(body["tags"]), security_group=body["security_group"], volume=volume, create=body,
        )
        with self.lock:
            machine.state = "pending"
            self.volumes[volume] = {"name": f"{body['name']}-root", "server": machine.id}
        return machine

    def _on_server(self, method: str, rest: str, body: Any) -> Any:
        server_id, _, action = rest.partition("/")
        machine = self.machines.get(server_id)
        if machine is None or machine.state == "deleted":
            raise _fail(404, "not_found", f"server {server_id} not found")
        if (method, action) == ("PATCH", "user_data/cloud-init"):
            machine.extra["user_data"] = body
            return None
        if (method, action) == ("POST", "action"):
            return self._act(machine, str((body or {}).get("action")))
        if (method, action) == ("DELETE", ""):
            if machine.state not in ("pending", "exited"):
                raise _fail(400, "precondition_failed", "server should be stopped to be deleted")
            self.delete(machine.id)
            return None
        if (method, action) == ("GET", ""):
            return {"server": self._view(machine)}
        raise self.no_route(method, f"/servers/{rest}")

    def _act(self, machine: FakeMachine, action: str) -> Any:
        with self.lock:
            if action == "poweron" and machine.kind in self.poweron_refused:
                raise self.no_capacity(machine.kind)
            if action == "poweron" and machine.state == "pending":
                machine.state = "booting"
            elif action == "poweroff" and machine.state == "running":
                machine.state = "exited"
            elif action == "terminate" and machine.state in ("booting", "running"):
                machine.state = "deleted"
                self.volumes.pop(machine.extra.get("volume", ""), None)
            else:
                raise _fail(400, "precondition_failed", f"{action} is not allowed in state {STATE[machine.state]}")
        return {"task": {"id": str(uuid.uuid4()), "description": action, "status": "pending"}}

    def _view(self, machine: FakeMachine) -> dict[str, Any]:
        up = machine.state == "running"
        group = machine.extra.get("security_group", "")
        address = machine.address if up else None
        return {
            "id": machine.id,
            "name": machine.name,
            "commercial_type": machine.kind,
            "state": STATE.get(machine.state, "running"),
            "tags": machine.extra.get("tags", []),
            "project": PROJECT,
            "image": {"name": machine.image},
            **({"public_ip": {"address": address, "dynamic": True}} if address else {}),  # not null: an object
            "public_ips": [{"address": address, "family": "inet", "dynamic": True}] if address else [],
            "private_ip": None,
            "security_group": {"id": group, "name": self.firewalls.get(group, {}).get("name", "")},
            "volumes": {"0": {"id": machine.extra.get("volume", ""), "volume_type": "l_ssd"}},
            "creation_date": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).isoformat(),
            "zone": machine.region or ZONES[0],  # a planted server's
        }

    def _group(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("project") != PROJECT or not body.get("name"):
            raise _fail(400, "invalid_arguments", "name and project are required")
        group = {
            "id": str(uuid.uuid4()),
            "name": body["name"],
            "project": body["project"],
            "description": body.get("description", ""),
            "stateful": body.get("stateful", True),
            "inbound_default_policy": body.get("inbound_default_policy", "accept"),
            "outbound_default_policy": body.get("outbound_default_policy", "accept"),
            "tags": body.get("tags", []),
            "creation_date": _now(),
        }
        with self.lock:
            self.firewalls[group["id"]] = {"name": group["name"], "group": group, "rules": []}
        return group

    def _shown(self, group_id: str) -> dict[str, Any]:
        inside = [{"id": m.id, "name": m.name} for m in self.live() if m.extra.get("security_group") == group_id]
        return {**self.firewalls[group_id]["group"], "servers": inside}

    def _on_group(self, method: str, parts: list[str], body: Any) -> Any:
        record = self.firewalls.get(parts[0])
        if record is None:
            raise _fail(404, "not_found", "security group not found")
        if method == "POST" and parts[1:] == ["rules"]:
            rule = dict(body or {})
            if rule.get("protocol") not in ("TCP", "UDP", "ICMP", "ANY") or rule.get("direction") not in (
                "inbound", "outbound",
            ) or rule.get("action") not in ("accept", "drop") or "/" not in str(rule.get("ip_range", "")):
                raise _fail(400, "invalid_arguments", f"invalid rule {rule}")
            rule.update(id=str(uuid.uuid4()), position=len(record["rules"]) + 1, editable=True)
            record["rules"].append(rule)
            raise Answer(201, {"rule": rule})
        if method == "DELETE" and len(parts) == 3 and parts[1] == "rules":
            if not any(r["id"] == parts[2] for r in record["rules"]):
                raise _fail(404, "not_found", "rule not found")
            record["rules"][:] = [r for r in record["rules"] if r["id"] != parts[2]]
            return None
        if method == "DELETE" and len(parts) == 1:
            if self._shown(parts[0])["servers"]:
                raise _fail(412, "precondition_failed", "security group is in use by servers")
            with self.lock:
                del self.firewalls[parts[0]]
            return None
        if method == "GET" and len(parts) == 1:
            return {"security_group": self._shown(parts[0])}
        raise self.no_route(method, f"/security_groups/{'/'.join(parts)}")
