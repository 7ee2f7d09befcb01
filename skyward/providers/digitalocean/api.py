"""DigitalOcean's API v2 (``api.digitalocean.com/v2``) as ``MachineAPI`` and
``FirewallAPI``: sizes and hourly prices (``GET /v2/sizes``), SSH keys
(``/v2/account/keys``), Droplets (``POST /v2/droplets``, ``GET
/v2/droplets?tag_name=skyward``, ``GET /v2/droplets/{id}``, ``DELETE
/v2/droplets/{id}``), tags (``POST /v2/tags``, ``DELETE /v2/tags/{name}``) and Cloud
Firewalls (``POST /v2/firewalls``, ``GET /v2/firewalls``, ``DELETE
/v2/firewalls/{id}``). Every Droplet is tagged ``skyward`` and with its pool's group,
the tag its pool's firewall guards and admits. The token is ``DIGITALOCEAN_TOKEN`` (or
``DIGITALOCEAN_ACCESS_TOKEN``, or ``access-token`` in doctl's
``~/.config/doctl/config.yaml``)."""

from __future__ import annotations

from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Firewall, Key, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, capacity_errors

URL = "https://api.digitalocean.com"
TOKEN = credentials.Source(("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"), "~/.config/doctl/config.yaml", "access-token")
TAG = "skyward"
PAGE = 200
NO_CAPACITY = ("not available", "capacity", "out of stock", "droplet limit")
ANYWHERE = {"addresses": ["0.0.0.0/0", "::/0"]}
ALL_PORTS = "0"
"""What a Cloud Firewall rule's ``ports`` is for every port of its protocol."""


class DigitalOceanAPI:
    """Calls DigitalOcean with the token from the environment."""

    def __init__(self) -> None:
        (token,) = credentials.require("DigitalOcean", [TOKEN])
        self._http = bearer_client("DigitalOcean", "digitalocean", URL, token, TOKEN.describe())

    def machine_types(self, region: str | None) -> list[MachineType]:
        kinds = []
        for size in self._pages("/v2/sizes", "sizes", "listing sizes"):
            if not size.get("available", True):
                continue
            gpu = fields.obj(size, "gpu_info")
            vram = fields.obj(gpu, "vram")
            for place in fields.items(size, "regions"):
                if region is not None and place != region:
                    continue
                kinds.append(MachineType(
                    name=fields.text(size, "slug"), vcpus=fields.number(size, "vcpus"),
                    memory_gb=fields.number(size, "memory") / 1024, price=fields.number(size, "price_hourly"),
                    region=str(place), accelerator=fields.text(gpu, "model", "") or None,
                    accelerator_count=fields.integer(gpu, "count", 0),
                    accelerator_memory_gb=fields.number(vram, "amount", 0) or None,
                    disk_gb=fields.number(size, "disk", 0) or None,
                ))
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        answer = self._http.call("POST", "/v2/account/keys", f"adding SSH key {name}", json={"name": name, "public_key": public_key})
        return fields.text(fields.obj(fields.as_object(answer), "ssh_key"), "id")

    def remove_key(self, key_id: str) -> None:
        self._http.remove(f"/v2/account/keys/{key_id}", f"deleting SSH key {key_id}")

    def keys(self) -> list[Key]:
        listed = self._pages("/v2/account/keys", "ssh_keys", "listing SSH keys")
        return [Key(fields.text(k, "id"), fields.text(k, "name", "")) for k in listed]

    def create(self, order: Order) -> str:
        body: dict[str, object] = {
            "name": order.name, "region": order.machine_type.region, "size": order.machine_type.name,
            "image": order.image, "ssh_keys": [order.key_id] if order.key_id else [],
            "tags": [TAG, order.group] if order.group else [TAG],
            "user_data": order.user_data,
        }
        shortage = f"DigitalOcean has no {order.machine_type.name} in {order.machine_type.region}"
        with capacity_errors(NO_CAPACITY, shortage, statuses=(422,)):
            answer = self._http.call("POST", "/v2/droplets", f"creating Droplet {order.name}", json=body)
        return fields.text(fields.obj(fields.as_object(answer), "droplet"), "id")

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/v2/droplets/{machine_id}", f"reading Droplet {machine_id}")
        if answer is None:
            return None
        return _machine(fields.obj(fields.as_object(answer), "droplet"))

    def machines(self) -> list[Machine]:
        return [_machine(d) for d in self._pages(f"/v2/droplets?tag_name={TAG}", "droplets", "listing Droplets")]

    def delete(self, machine_id: str) -> None:
        self._http.remove(f"/v2/droplets/{machine_id}", f"deleting Droplet {machine_id}")

    def add_firewall(self, group: str) -> str:
        """The tag ``group`` (a rule can only name a tag that exists), then a Cloud Firewall
        of that name over the Droplets tagged with it; the tag is deleted again if the
        firewall cannot be made."""
        self._http.call("POST", "/v2/tags", f"creating tag {group}", json={"name": group})
        own = {"tags": [group]}
        body: dict[str, object] = {
            "name": group, "tags": [group],
            "inbound_rules": [
                {"protocol": "tcp", "ports": "22", "sources": ANYWHERE},
                {"protocol": "tcp", "ports": ALL_PORTS, "sources": own},
                {"protocol": "udp", "ports": ALL_PORTS, "sources": own},
            ],
            "outbound_rules": [
                {"protocol": protocol, "ports": ALL_PORTS, "destinations": ANYWHERE}
                for protocol in ("tcp", "udp", "icmp")
            ],
        }
        with self._http.removed_on_error(f"/v2/tags/{group}", f"deleting tag {group}"):
            answer = self._http.call("POST", "/v2/firewalls", f"creating firewall {group}", json=body)
        return fields.text(fields.obj(fields.as_object(answer), "firewall"), "id")

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        self._http.remove(f"/v2/firewalls/{firewall_id}", f"deleting firewall {group}")
        self._http.remove(f"/v2/tags/{group}", f"deleting tag {group}")

    def firewalls(self) -> list[Firewall]:
        return [
            Firewall(fields.text(f, "id"), fields.text(f, "name", ""))
            for f in self._pages("/v2/firewalls", "firewalls", "listing firewalls")
        ]

    def _pages(self, path: str, key: str, what: str) -> list[JsonObject]:
        """Every item of a paginated list (bounded: at most 50 pages)."""
        found: list[JsonObject] = []
        for page in range(1, 51):
            separator = "&" if "?" in path else "?"
            answer = fields.as_object(self._http.call("GET", f"{path}{separator}page={page}&per_page={PAGE}", what))
            found.extend(fields.objects(answer, key))
            if not fields.obj(fields.obj(answer, "links"), "pages").get("next"):
                break
        return found


def _machine(droplet: JsonObject) -> Machine:
    status = fields.text(droplet, "status", "")
    addresses = fields.objects(fields.obj(droplet, "networks"), "v4")
    public = next((fields.text(a, "ip_address") for a in addresses if a.get("type") == "public"), None)
    private = next((fields.text(a, "ip_address") for a in addresses if a.get("type") == "private"), None)
    state: MachineState = "ended" if status == "archive" else "stopped" if status == "off" else "running" if status == "active" and public else "starting"
    created = epoch(droplet.get("created_at"))
    price = fields.number_or_none(fields.obj(droplet, "size"), "price_hourly")
    return Machine(
        fields.text(droplet, "id"), fields.text(droplet, "name", ""), state, public, 22, private,
        price, False, fields.text(droplet, "size_slug", ""), created,
    )
