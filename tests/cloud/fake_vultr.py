"""A local Vultr API v2 (``/v2``): ``GET /regions``, ``GET /plans``, ``POST/GET
/ssh-keys``, ``DELETE /ssh-keys/{id}``, ``POST /instances``, ``GET /instances?tag=``,
``GET/DELETE /instances/{id}``, ``POST/GET /firewalls``, ``POST /firewalls/{id}/rules``,
``DELETE /firewalls/{id}/rules/{n}`` and ``DELETE /firewalls/{id}``, in Vultr's shapes:
cursor pages (``per_page``, ``cursor``, ``meta.links.next``), the ``{"error", "status"}``
error body, base64 user data, ``main_ip`` "0.0.0.0" until an address is assigned. Regions
and plans are answered without the key (Vultr's OpenAPI needs none for them). A listing
by ``tag`` holds only the instances that carry it. A request with a query parameter or a
body field these operations do not declare is refused (400, naming it). A firewall group
is refused deletion while an instance is in it, and holds at most 50 rules. Rules are
recorded, not enforced (the lab's hosts share one bridge). Every exchange is checked
against Vultr's OpenAPI (``pinned``; tests/cloud/descriptions/vultr)."""

from __future__ import annotations

import base64
import binascii
import datetime
import uuid
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

REGIONS = ["ewr", "ord", "fra", "ams", "sjc", "nrt"]
OS_IDS = {2284: "Ubuntu 24.04 LTS x64", 1743: "Ubuntu 22.04 LTS x64"}


def _plan(
    plan_id: str,
    vcpus: int,
    ram_mb: int,
    disk: int,
    monthly: float,
    locations: list[str],
    gpu: str | None = None,
    vram: int = 0,
) -> dict[str, Any]:
    """A plan as Vultr's OpenAPI shows one (a monthly cost only: no hourly one), with
    govultr's GPU fields for a GPU plan."""
    plan: dict[str, Any] = {
        "id": plan_id,
        "vcpu_count": vcpus,
        "ram": ram_mb,
        "disk": disk,
        "disk_count": 1,
        "bandwidth": 1000,
        "monthly_cost": monthly,
        "type": "vcg" if gpu else plan_id.split("-", 1)[0],
        "locations": locations,
    }
    if gpu:
        plan.update(gpu_type=gpu, gpu_vram_gb=vram)
    return plan


PLANS = [
    _plan("vc2-1c-1gb", 1, 1024, 25, 5.0, ["ewr", "ord", "fra"]),
    _plan("vc2-2c-4gb", 2, 4096, 80, 20.0, ["ewr", "ord", "fra"]),
    _plan("vhf-2c-4gb", 2, 4096, 128, 24.0, ["ewr"]),
    _plan("vcg-a100-1c-6g-4vram", 1, 6144, 70, 90.0, ["ewr"], "NVIDIA_A100", 4),
    _plan("vcg-a100-12c-120g-80vram", 12, 122880, 1400, 1750.0, ["ewr", "ord"], "NVIDIA_A100", 80),
    _plan("vcg-a100-24c-240g-160vram", 24, 245760, 2800, 3500.0, ["ewr"], "NVIDIA_A100", 160),
    _plan("vcg-l40s-16c-180g-48vram", 16, 184320, 1200, 1220.0, ["ewr", "ord"], "NVIDIA_L40S", 48),
    _plan("vcg-h100-24c-240g-80vram", 24, 245760, 2600, 2190.0, ["fra"], "NVIDIA_HGX_H100", 80),
    _plan("vcg-mi300x-32c-256g-192vram", 32, 262144, 2000, 1825.0, ["ord"], "AMD_MI300X", 192),
]


PAGED = ("per_page", "cursor")
OPERATIONS = (
    Operation("GET", "/regions", PAGED),
    Operation("GET", "/plans", ("type", *PAGED)),
    Operation("GET", "/ssh-keys", PAGED),
    Operation("POST", "/ssh-keys", body=shape("name", "ssh_key")),
    Operation("DELETE", "/ssh-keys/{ssh-key-id}"),
    Operation("GET", "/instances", ("tag", *PAGED)),
    Operation("POST", "/instances", body=shape(
        "region", "plan", "os_id", "ipxe_chain_url", "iso_id", "script_id", "snapshot_id", "enable_ipv6",
        "disable_public_ipv4", "attach_vpc", "label", "sshkey_id", "backups", "app_id", "image_id", "user_data",
        "ddos_protection", "activation_email", "hostname", "firewall_group_id", "reserved_ipv4", "enable_vpc",
        "tags", "user_scheme", "app_variables",
    )),
    Operation("GET", "/instances/{instance-id}"),
    Operation("DELETE", "/instances/{instance-id}"),
    Operation("GET", "/firewalls", PAGED),
    Operation("POST", "/firewalls", body=shape("description")),
    Operation("DELETE", "/firewalls/{firewall-group-id}"),
    Operation("POST", "/firewalls/{firewall-group-id}/rules", body=shape(
        "ip_type", "protocol", "subnet", "subnet_size", "port", "source", "notes",
    )),
    Operation("DELETE", "/firewalls/{firewall-group-id}/rules/{firewall-rule-id}"),
)
"""The operations of Vultr's API v2 the fake serves, with the fields Vultr documents."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def _fail(status: int, text: str) -> Answer:
    return Answer(status, {"error": text, "status": status})


class FakeVultr(FakeCloud):
    name = "vultr"
    prefix = "/v2"
    credentials = {"VULTR_API_KEY": TOKEN}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "vultr"
    public = frozenset({("GET", "/regions"), ("GET", "/plans")})  # Vultr's OpenAPI: `security: []`
    page_limit = 500
    """The most items a page holds (Vultr's ``per_page`` maximum); a test lowers it."""

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, text)

    def no_capacity(self, kind: str) -> Answer:
        return _fail(
            400, f"Unable to create instance: plan {kind} is not available in the selected location"
        )

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/regions"):
            return self._page(
                "regions",
                [{"id": r, "city": r.upper(), "options": ["kubernetes"]} for r in REGIONS],
                query,
            )
        if (method, path) == ("GET", "/plans"):
            return self._page(
                "plans", [p for p in PLANS if query.get("type", "all") in ("all", p["type"])], query
            )
        if path == "/ssh-keys":
            if method == "POST":
                raise Answer(201, {"ssh_key": self._key(body or {})})
            return self._page("ssh_keys", list(self.keys.values()), query)
        if path.startswith("/ssh-keys/") and method == "DELETE":
            if self.keys.pop(path.removeprefix("/ssh-keys/"), None) is None:
                raise _fail(404, "Invalid SSH key.")
            return None
        if path == "/instances":
            if method == "POST":
                raise Answer(202, {"instance": self._instance(self._create(body or {}))})
            tag = query.get("tag")
            live = [m for m in self.live() if tag is None or tag in m.extra.get("tags", [])]
            return self._page("instances", [self._instance(m) for m in live], query)
        if path == "/firewalls":
            if method == "POST":
                raise Answer(201, {"firewall_group": self._group(body or {})})
            return self._page("firewall_groups", [self._shown(i) for i in self.firewalls], query)
        if path.startswith("/firewalls/") and path.endswith("/rules") and method == "POST":
            raise Answer(201, {"firewall_rule": self._rule(path.split("/")[2], body or {})})
        if path.startswith("/firewalls/") and "/rules/" in path and method == "DELETE":
            _, _, group_id, _, rule_id = path.split("/")
            rules = (self.firewalls.get(group_id) or {}).get("rules", [])
            if not any(str(r["id"]) == rule_id for r in rules):
                raise _fail(404, "Invalid firewall rule.")
            rules[:] = [r for r in rules if str(r["id"]) != rule_id]
            return None
        if path.startswith("/firewalls/") and method == "DELETE":
            return self._delete_group(path.removeprefix("/firewalls/"))
        if path.startswith("/instances/"):
            machine = self.machines.get(path.removeprefix("/instances/"))
            if machine is None or machine.state == "deleted":
                raise _fail(404, "Invalid instance-id.")
            if method == "DELETE":
                self.delete(machine.id)
                return None
            return {"instance": self._instance(machine)}
        raise self.no_route(method, path)

    def _page(self, key: str, items: list[Any], query: dict[str, str]) -> dict[str, Any]:
        size = min(int(query.get("per_page", 100)), self.page_limit, 500)
        start = int(base64.b64decode(query["cursor"]).decode()) if query.get("cursor") else 0
        end = start + size
        after = base64.b64encode(str(end).encode()).decode() if end < len(items) else ""
        return {
            key: items[start:end],
            "meta": {"total": len(items), "links": {"next": after, "prev": ""}},
        }

    def _key(self, body: dict[str, Any]) -> dict[str, Any]:
        if not str(body.get("ssh_key", "")).startswith("ssh-") or not body.get("name"):
            raise _fail(400, "Invalid SSH key.")
        key = {
            "id": str(uuid.uuid4()),
            "date_created": _now(),
            "name": body["name"],
            "ssh_key": body["ssh_key"],
        }
        self.keys[key["id"]] = key
        return key

    def _group(self, body: dict[str, Any]) -> dict[str, Any]:
        group = {
            "id": uuid.uuid4().hex[:8],
            "description": str(body.get("description") or ""),
            "date_created": _now(),
            "date_modified": _now(),
            "instance_count": 0,
            "rule_count": 0,
            "max_rule_count": 50,
        }
        with self.lock:  # "name" is the test's view of what the group guards (clouds.py)
            self.firewalls[group["id"]] = {
                "name": group["description"],
                "group": group,
                "rules": [],
            }
        return group

    def _shown(self, group_id: str) -> dict[str, Any]:
        record = self.firewalls[group_id]
        inside = [m for m in self.live() if m.extra.get("firewall_group_id") == group_id]
        return {
            **record["group"],
            "instance_count": len(inside),
            "rule_count": len(record["rules"]),
        }

    def _rule(self, group_id: str, body: dict[str, Any]) -> dict[str, Any]:
        record = self.firewalls.get(group_id)
        if record is None:
            raise _fail(404, "Invalid firewall group.")
        if body.get("ip_type") not in ("v4", "v6") or body.get("protocol") not in (
            "icmp",
            "tcp",
            "udp",
            "gre",
        ):
            raise _fail(400, f"Invalid ip_type or protocol in {body}")
        if not isinstance(body.get("subnet"), str) or not isinstance(body.get("subnet_size"), int):
            raise _fail(400, "subnet and subnet_size are required")
        if body.get("protocol") in ("tcp", "udp") and not body.get("port"):
            raise _fail(400, "port is required for tcp and udp rules")
        if len(record["rules"]) >= record["group"]["max_rule_count"]:
            raise _fail(400, "Firewall group is at its maximum number of rules")
        rule = {
            "id": max((r["id"] for r in record["rules"]), default=0) + 1,
            "type": body["ip_type"],
            "ip_type": body["ip_type"],
            "action": "accept",
            "protocol": body["protocol"],
            "port": body.get("port", ""),
            "subnet": body["subnet"],
            "subnet_size": body["subnet_size"],
            "source": body.get("source", ""),
            "notes": body.get("notes", ""),
        }
        record["rules"].append(rule)
        return rule

    def _delete_group(self, group_id: str) -> None:
        if group_id not in self.firewalls:
            raise _fail(404, "Invalid firewall group.")
        if self._shown(group_id)["instance_count"]:
            raise _fail(400, "Unable to delete firewall group: instances are still linked to it")
        with self.lock:
            del self.firewalls[group_id]

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        plan = next((p for p in PLANS if p["id"] == body.get("plan")), None)
        if plan is None or body.get("region") not in REGIONS:
            raise _fail(400, f"Invalid plan {body.get('plan')} or region {body.get('region')}")
        if body["region"] not in plan["locations"]:
            raise self.no_capacity(plan["id"])
        if body.get("os_id") not in OS_IDS:
            raise _fail(400, f"Invalid os_id {body.get('os_id')}")
        keys = [self.keys[k]["ssh_key"] for k in body.get("sshkey_id") or [] if k in self.keys]
        if not keys or len(keys) != len(body["sshkey_id"]):
            raise _fail(400, "Invalid SSH key.")
        if body.get("firewall_group_id") not in self.firewalls:
            raise _fail(400, "Invalid firewall group.")
        try:
            user_data = base64.b64decode(str(body.get("user_data", "")), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise _fail(400, "user_data must be base64 encoded") from None
        if not body.get("label") or len(str(body.get("hostname", ""))) > 63:
            raise _fail(400, "Invalid label or hostname")
        price = float(plan["monthly_cost"] / 730)
        return self.add(
            body["label"],
            plan["id"],
            False,
            OS_IDS[body["os_id"]],
            keys[0],
            price,
            region=body["region"],
            tags=list(body.get("tags") or []),
            firewall_group_id=body["firewall_group_id"],
            user_data=user_data,
            user_scheme=body.get("user_scheme", "root"),
        )

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        up = machine.state == "running"
        status = {"booting": "pending", "running": "active", "exited": "active"}.get(
            machine.state, "pending"
        )
        plan = next((p for p in PLANS if p["id"] == machine.kind), PLANS[0])
        return {
            "id": machine.id,
            "os": machine.image,
            "ram": plan["ram"],
            "disk": plan["disk"],
            "main_ip": machine.address if up else "0.0.0.0",
            "vcpu_count": plan["vcpu_count"],
            "region": machine.region or "ewr",  # a planted instance's
            "plan": machine.kind,
            "status": status,
            "power_status": "running" if up else "stopped",
            "server_status": "ok" if up else "none",
            "date_created": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).strftime(
                "%Y-%m-%dT%H:%M:%S+00:00"
            ),
            "label": machine.name,
            "hostname": machine.name,
            "tags": machine.extra.get("tags", []),
            "internal_ip": "",
            "firewall_group_id": machine.extra.get("firewall_group_id", ""),
            "features": [],
            "v6_main_ip": "",
            "os_id": next((k for k, v in OS_IDS.items() if v == machine.image), 0),
        }
