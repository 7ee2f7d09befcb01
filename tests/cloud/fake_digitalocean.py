"""A local DigitalOcean API v2: ``GET /v2/sizes``, ``/v2/account/keys``, ``POST
/v2/droplets``, ``GET /v2/droplets?tag_name=``, ``GET/DELETE /v2/droplets/{id}``, ``POST
/v2/tags``, ``DELETE /v2/tags/{name}``, ``POST/GET /v2/firewalls`` and ``DELETE
/v2/firewalls/{id}``, with its pagination envelope (``page``, ``per_page``, ``links``,
``meta``) and its error shape (``id``, ``message``). A listing by ``tag_name`` holds only
the Droplets that carry the tag. A request with a query parameter or a body field these
operations do not declare is refused (422 ``unprocessable_entity``, naming it).
Firewalls are recorded, not enforced (the lab's hosts share one bridge). A Droplet's
private (VPC) address is its public one here: each lab host has one address."""

from __future__ import annotations

import datetime
import re
import uuid
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

SIZES = [
    {"slug": "s-1vcpu-1gb", "memory": 1024, "vcpus": 1, "disk": 25, "transfer": 1.0, "price_hourly": 0.00893,
     "price_monthly": 6.0, "regions": ["nyc1", "nyc3", "fra1"], "available": True, "description": "Basic"},
    {"slug": "s-2vcpu-4gb", "memory": 4096, "vcpus": 2, "disk": 80, "transfer": 4.0, "price_hourly": 0.03571,
     "price_monthly": 24.0, "regions": ["nyc1", "nyc3", "fra1"], "available": True, "description": "Basic"},
    {"slug": "s-4vcpu-8gb", "memory": 8192, "vcpus": 4, "disk": 160, "transfer": 5.0, "price_hourly": 0.07143,
     "price_monthly": 48.0, "regions": ["nyc1", "fra1"], "available": True, "description": "Basic"},
    {"slug": "gpu-h100x1-80gb", "memory": 245760, "vcpus": 20, "disk": 720, "transfer": 15.0, "price_hourly": 3.39,
     "price_monthly": 2522.16, "regions": ["nyc2", "tor1"], "available": True, "description": "H100 GPU - 1X",
     "gpu_info": {"count": 1, "vram": {"amount": 80, "unit": "gib"}, "model": "nvidia_h100"}},
]
"""Sizes with every field DigitalOcean's description requires of one (``transfer``: TB a month)."""

TAG_NAME = re.compile(r"^[a-zA-Z0-9_\-:]+$")
FIREWALL_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9.-]+$")
NOT_FOUND = {"id": "not_found", "message": "The resource you were accessing could not be found."}
ERROR_IDS = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 422: "unprocessable_entity"}
PAGED = ("page", "per_page")
TARGETS = shape("addresses", "droplet_ids", "load_balancer_uids", "kubernetes_ids", "tags")
"""A firewall rule's sources or destinations."""
OPERATIONS = (
    Operation("GET", "/v2/sizes", PAGED),
    Operation("GET", "/v2/account/keys", PAGED),
    Operation("POST", "/v2/account/keys", body=shape("name", "public_key")),
    Operation("DELETE", "/v2/account/keys/{ssh_key_identifier}"),
    Operation("GET", "/v2/droplets", ("tag_name", *PAGED)),
    Operation("POST", "/v2/droplets", body=shape(
        "name", "region", "size", "image", "ssh_keys", "backups", "backup_policy", "ipv6", "monitoring", "tags",
        "user_data", "private_networking", "volumes", "vpc_uuid", "with_droplet_agent",
    )),
    Operation("GET", "/v2/droplets/{droplet_id}"),
    Operation("DELETE", "/v2/droplets/{droplet_id}"),
    Operation("POST", "/v2/tags", body=shape("name")),
    Operation("DELETE", "/v2/tags/{tag_id}"),
    Operation("GET", "/v2/firewalls", PAGED),
    Operation("POST", "/v2/firewalls", body=shape(
        "name", "droplet_ids", "tags",
        inbound_rules=shape("protocol", "ports", sources=TARGETS),
        outbound_rules=shape("protocol", "ports", destinations=TARGETS),
    )),
    Operation("DELETE", "/v2/firewalls/{firewall_id}"),
)
"""The operations of DigitalOcean's API v2 the fake serves, with the fields it documents."""


class FakeDigitalOcean(FakeCloud):
    name = "digitalocean"
    credentials = {"DIGITALOCEAN_TOKEN": TOKEN}
    operations = OPERATIONS
    invalid_status = 422
    pinned = "digitalocean"

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"id": ERROR_IDS.get(status, "error"), "message": text})

    def success(self, method: str, path: str) -> int:
        return {("POST", "/v2/droplets"): 202, ("POST", "/v2/account/keys"): 201}.get((method, path), 200)

    def no_capacity(self, kind: str) -> Answer:
        return Answer(422, {"id": "unprocessable_entity", "message": "Size is not available in this region.", "request_id": "r"})

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/v2/sizes"):
            return _page("sizes", SIZES, query)
        if path == "/v2/account/keys":
            if method == "POST":
                key_id = int(self.new_id())
                key = {"id": key_id, "name": body["name"], "public_key": body["public_key"], "fingerprint": f"fp:{key_id}"}
                self.keys[str(key_id)] = key
                return {"ssh_key": key}
            return _page("ssh_keys", list(self.keys.values()), query)
        if path.startswith("/v2/account/keys/") and method == "DELETE":
            if self.keys.pop(path.rsplit("/", 1)[1], None) is None:
                raise Answer(404, NOT_FOUND)
            return None
        if path == "/v2/droplets":
            if method == "POST":
                created = self._create(body)
                action = int(self.new_id())
                return {"droplet": self._droplet(created), "links": {"actions": [
                    {"id": action, "rel": "create", "href": f"{self.url}/v2/actions/{action}"}]}}
            tag = query.get("tag_name")
            tagged = [m for m in self.live() if tag is None or tag in m.extra.get("tags", [])]
            return _page("droplets", [self._droplet(m) for m in tagged], query)
        if (method, path) == ("POST", "/v2/tags"):
            raise Answer(201, {"tag": self._tag(body)})
        if path.startswith("/v2/tags/") and method == "DELETE":
            if path.removeprefix("/v2/tags/") not in self.tags:
                raise Answer(404, NOT_FOUND)
            self.tags.discard(path.removeprefix("/v2/tags/"))
            return None
        if path == "/v2/firewalls":
            if method == "POST":
                raise Answer(202, {"firewall": self._firewall(body)})
            return _page("firewalls", list(self.firewalls.values()), query)
        if path.startswith("/v2/firewalls/") and method == "DELETE":
            if self.firewalls.pop(path.removeprefix("/v2/firewalls/"), None) is None:
                raise Answer(404, NOT_FOUND)
            return None
        if path.startswith("/v2/droplets/"):
            machine = self.machines.get(path.rsplit("/", 1)[1])
            if machine is None or machine.state == "deleted":
                raise Answer(404, NOT_FOUND)
            if method == "DELETE":
                self.delete(machine.id)
                return None
            return {"droplet": self._droplet(machine)}
        raise self.no_route(method, path)

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        size = next((s for s in SIZES if s["slug"] == body.get("size")), None)
        if size is None or not body.get("image") or not body.get("name"):
            raise Answer(422, {"id": "unprocessable_entity", "message": "You specified an invalid size or image."})
        if body.get("region") not in size["regions"]:
            raise self.no_capacity(size["slug"])
        keys = [self.keys[str(k)]["public_key"] for k in body.get("ssh_keys", []) if str(k) in self.keys]
        if not keys:
            raise Answer(422, {"id": "unprocessable_entity", "message": "ssh_keys: unknown key"})
        self.tags.update(body.get("tags", []))  # a Droplet's tags may be new ones
        return self.add(
            body["name"], size["slug"], False, body["image"], keys[0], size["price_hourly"], region=body["region"],
            tags=body.get("tags", []), user_data=body.get("user_data", ""),
        )

    def _droplet(self, machine: FakeMachine) -> dict[str, Any]:
        """The Droplet with every field DigitalOcean's description requires of one."""
        status = {"running": "active", "exited": "off"}.get(machine.state, "new")
        up = machine.state == "running"
        size = next((s for s in SIZES if s["slug"] == machine.kind), SIZES[0])
        region = machine.region or "nyc3"  # a planted Droplet's
        v4 = [{"ip_address": machine.address, "netmask": "255.255.255.0", "gateway": "192.0.2.1", "type": kind}
              for kind in ("public", "private")] if up else []
        return {
            "id": int(machine.id), "name": machine.name, "memory": size["memory"], "vcpus": size["vcpus"],
            "disk": size["disk"], "locked": False, "status": status, "kernel": None,
            "created_at": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "features": ["monitoring"], "backup_ids": [], "next_backup_window": None, "snapshot_ids": [],
            "image": {"slug": machine.image, "type": "base", "distribution": "Ubuntu", "public": True},
            "volume_ids": [], "size": size, "size_slug": machine.kind, "networks": {"v4": v4, "v6": []},
            "region": {"name": region, "slug": region, "features": ["metadata"], "available": True,
                       "sizes": [s["slug"] for s in SIZES if region in s["regions"]]},
            "tags": machine.extra.get("tags", []),
        }

    def _tag(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str((body or {}).get("name") or "")
        if not TAG_NAME.match(name) or len(name) > 255:
            raise Answer(400, {"id": "bad_request", "message": "tag name may contain letters, numbers, colons, dashes and underscores"})
        self.tags.add(name)
        return {"name": name, "resources": {"count": 0, "droplets": {"count": 0}}}

    def _firewall(self, body: dict[str, Any]) -> dict[str, Any]:
        """The firewall ``body`` describes, stored; Answer 422 as DigitalOcean refuses one."""
        name = str(body.get("name") or "")
        inbound, outbound = body.get("inbound_rules") or [], body.get("outbound_rules") or []
        if not FIREWALL_NAME.match(name):
            raise Answer(422, {"id": "unprocessable_entity", "message": "name must begin with an alphanumeric character"})
        if not inbound and not outbound:
            raise Answer(422, {"id": "unprocessable_entity", "message": "must contain at least one inbound or outbound rule"})
        for rule, side in [(r, "sources") for r in inbound] + [(r, "destinations") for r in outbound]:
            if rule.get("protocol") not in ("tcp", "udp", "icmp") or not isinstance(rule.get("ports"), str) or side not in rule:
                raise Answer(422, {"id": "unprocessable_entity", "message": f"invalid rule {rule}"})
            unknown = [tag for tag in rule[side].get("tags", []) if tag not in self.tags]
            if unknown:
                raise Answer(422, {"id": "unprocessable_entity", "message": f"tag {unknown[0]} does not exist"})
        self.tags.update(body.get("tags", []))  # the firewall's own tags may be new ones
        firewall = {
            "id": str(uuid.uuid4()), "name": name, "status": "succeeded", "inbound_rules": inbound,
            "outbound_rules": outbound, "droplet_ids": body.get("droplet_ids") or [], "tags": body.get("tags") or [],
            "created_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "pending_changes": [],
        }
        with self.lock:
            self.firewalls[firewall["id"]] = firewall
        return firewall


def _page(key: str, items: list[Any], query: dict[str, str]) -> dict[str, Any]:
    """Page ``page`` of ``items`` (``per_page`` of them: 20 unless asked, at most 200) in
    DigitalOcean's envelope, whose ``links.pages.next`` is there while more remain."""
    size, page = min(int(query.get("per_page", 20)), 200), int(query.get("page", 1))
    links = {"pages": {"next": f"?page={page + 1}&per_page={size}"}} if page * size < len(items) else {}
    return {key: items[(page - 1) * size:page * size], "links": links, "meta": {"total": len(items)}}
