"""A local DigitalOcean API v2: ``GET /v2/sizes``, ``/v2/account/keys``, ``POST
/v2/droplets``, ``GET /v2/droplets?tag_name=``, ``GET/DELETE /v2/droplets/{id}``, with
its pagination envelope (``links``, ``meta``) and its error shape (``id``, ``message``)."""

from __future__ import annotations

import datetime
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine

SIZES = [
    {"slug": "s-1vcpu-1gb", "memory": 1024, "vcpus": 1, "disk": 25, "price_hourly": 0.00893, "price_monthly": 6.0,
     "regions": ["nyc1", "nyc3", "fra1"], "available": True},
    {"slug": "s-2vcpu-4gb", "memory": 4096, "vcpus": 2, "disk": 80, "price_hourly": 0.03571, "price_monthly": 24.0,
     "regions": ["nyc1", "nyc3", "fra1"], "available": True},
    {"slug": "s-4vcpu-8gb", "memory": 8192, "vcpus": 4, "disk": 160, "price_hourly": 0.07143, "price_monthly": 48.0,
     "regions": ["nyc1", "fra1"], "available": True},
    {"slug": "gpu-h100x1-80gb", "memory": 245760, "vcpus": 20, "disk": 720, "price_hourly": 3.39, "price_monthly": 2522.16,
     "regions": ["nyc2", "tor1"], "available": True,
     "gpu_info": {"count": 1, "vram": {"amount": 80, "unit": "gib"}, "model": "nvidia_h100"}},
]


class FakeDigitalOcean(FakeCloud):
    name = "digitalocean"
    credentials = {"DIGITALOCEAN_TOKEN": TOKEN}

    def no_capacity(self, kind: str) -> Answer:
        return Answer(422, {"id": "unprocessable_entity", "message": "Size is not available in this region.", "request_id": "r"})

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/v2/sizes"):
            return _page("sizes", SIZES)
        if path == "/v2/account/keys":
            if method == "POST":
                key_id = int(self.new_id())
                key = {"id": key_id, "name": body["name"], "public_key": body["public_key"], "fingerprint": f"fp:{key_id}"}
                self.keys[str(key_id)] = key
                return {"ssh_key": key}
            return _page("ssh_keys", list(self.keys.values()))
        if path.startswith("/v2/account/keys/") and method == "DELETE":
            if self.keys.pop(path.rsplit("/", 1)[1], None) is None:
                raise Answer(404, {"id": "not_found", "message": "The resource you were accessing could not be found."})
            return None
        if path == "/v2/droplets":
            if method == "POST":
                return {"droplet": self._droplet(self._create(body))}
            tag = query.get("tag_name")
            return _page("droplets", [self._droplet(m) for m in self.live() if tag is None or tag in m.extra.get("tags", [tag])])
        if path.startswith("/v2/droplets/"):
            machine = self.machines.get(path.rsplit("/", 1)[1])
            if machine is None or machine.state == "deleted":
                raise Answer(404, {"id": "not_found", "message": "The resource you were accessing could not be found."})
            if method == "DELETE":
                self.delete(machine.id)
                return None
            return {"droplet": self._droplet(machine)}
        raise Answer(404, {"id": "not_found", "message": f"no route {method} {path}"})

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        size = next((s for s in SIZES if s["slug"] == body.get("size")), None)
        if size is None or not body.get("image") or not body.get("name"):
            raise Answer(422, {"id": "unprocessable_entity", "message": "You specified an invalid size or image."})
        if body.get("region") not in size["regions"]:
            raise self.no_capacity(size["slug"])
        keys = [self.keys[str(k)]["public_key"] for k in body.get("ssh_keys", []) if str(k) in self.keys]
        if not keys:
            raise Answer(422, {"id": "unprocessable_entity", "message": "ssh_keys: unknown key"})
        return self.add(
            body["name"], size["slug"], False, body["image"], keys[0], size["price_hourly"], region=body["region"],
            tags=body.get("tags", []), user_data=body.get("user_data", ""),
        )

    def _droplet(self, machine: FakeMachine) -> dict[str, Any]:
        status = {"running": "active", "exited": "off"}.get(machine.state, "new")
        up = machine.state == "running"
        size = next((s for s in SIZES if s["slug"] == machine.kind), SIZES[0])
        return {
            "id": int(machine.id), "name": machine.name, "status": status, "size_slug": machine.kind,
            "size": {"slug": machine.kind, "price_hourly": size["price_hourly"]}, "region": {"slug": machine.region},
            "networks": {"v4": [{"ip_address": machine.address, "type": "public"}] if up else [], "v6": []},
            "tags": machine.extra.get("tags", []), "image": {"slug": machine.image},
            "created_at": datetime.datetime.fromtimestamp(machine.created, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


def _page(key: str, items: list[Any]) -> dict[str, Any]:
    return {key: items, "links": {}, "meta": {"total": len(items)}}
