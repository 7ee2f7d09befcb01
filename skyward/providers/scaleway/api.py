"""Scaleway's Instance API v1 (``api.scaleway.com/instance/v1/zones/{zone}``) as
``MachineAPI`` and ``FirewallAPI``, in one zone: server types and their hourly prices
(``GET /products/servers``, less those ``GET /products/servers/availability`` calls a
shortage), servers (``POST /servers``, its cloud-init user data ``PATCH
/servers/{id}/user_data/cloud-init``, ``POST /servers/{id}/action`` poweron and
terminate, ``GET /servers?tags=skyward``, ``GET/DELETE /servers/{id}``) and security
groups (``POST/GET /security_groups``, ``POST /security_groups/{id}/rules``, ``DELETE
/security_groups/{id}/rules/{rule}`` and ``DELETE /security_groups/{id}``).

No key is registered with the account (a project's IAM keys reach every server of the
project): each server carries the pool's public key in its ``AUTHORIZED_KEY=`` tag,
which Scaleway's images install for root. Every server is tagged ``skyward`` and with
its pool's group and sits in the pool's security group, which drops inbound traffic but
SSH and, once a server has its address, everything from that address. The secret key
travels as ``X-Auth-Token``: ``secret_key=``, ``$SCW_SECRET_KEY`` or ``secret_key`` in
``~/.config/scw/config.yaml`` (the scw CLI's places); the project likewise
(``$SCW_DEFAULT_PROJECT_ID``, ``default_project_id``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Firewall, Machine, MachineState, MachineType, MadeFirewalls, Order, epoch
from skyward.providers.cloud.errors import CapacityError, CloudAPIError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, Params, base_url, message
from skyward.providers.cloud.keys import KeysInOrders

URL = "https://api.scaleway.com"
CONFIG = "~/.config/scw/config.yaml"
SECRET_KEY = credentials.Source(("SCW_SECRET_KEY",), CONFIG, "secret_key")
PROJECT = credentials.Source(("SCW_DEFAULT_PROJECT_ID", "SCW_PROJECT_ID"), CONFIG, "default_project_id")
ZONE = credentials.Source(("SCW_DEFAULT_ZONE",), CONFIG, "default_zone")
TAG = "skyward"
KEY_TAG = "AUTHORIZED_KEY="
"""A server tag Scaleway's images read as a key for root (spaces written as ``_``)."""
PAGE = 100
MAX_PAGES = 50
NO_CAPACITY_TYPES = ("out_of_stock",)
NO_CAPACITY = ("out of stock", "no stock", "shortage", "not enough", "no capacity", "unavailable")
SHORTAGE = "shortage"
GIB = 2**30
GB = 10**9
STOPPED = ("stopped", "stopped in place", "stopping", "locked")
"""Halted but still there (``locked``: held by Scaleway); a deleted server answers 404."""
SSH_RULE = {
    "protocol": "TCP",
    "direction": "inbound",
    "action": "accept",
    "ip_range": "0.0.0.0/0",
    "dest_port_from": 22,
    "dest_port_to": 22,
}
"""The rule a pool's security group is made with: inbound SSH from anywhere."""
T = TypeVar("T")


def peer_rule(address: str) -> dict[str, object]:
    """Inbound everything from one server of the pool."""
    return {"protocol": "ANY", "direction": "inbound", "action": "accept", "ip_range": f"{address}/32"}


class ScalewayAPI(KeysInOrders):
    """Calls Scaleway in ``zone`` with ``secret_key`` in ``project`` (None: found as the scw
    CLI finds them)."""

    def __init__(self, zone: str, secret_key: str | None = None, project: str | None = None,
                 usd_per_eur: float = 1.0) -> None:
        key = credentials.given_or_found("Scaleway", secret_key, SECRET_KEY)
        self.zone = zone
        self.project = credentials.given_or_found("Scaleway", project, PROJECT)
        self.usd_per_eur = usd_per_eur
        """Dollars per euro: Scaleway's prices are in euros, offers in dollars."""
        self._made = MadeFirewalls("Scaleway", "security group", "a server")
        """The security group this client made for each group (``add_firewall``)."""
        self._admitted: dict[str, tuple[str, str]] = {}
        """Per server: its security group and the rule that admits its address."""
        self._http = ApiClient(
            "Scaleway",
            base_url("scaleway", URL),
            lambda: {"X-Auth-Token": key},
            f"Scaleway(secret_key=...) or {SECRET_KEY.describe()}",
        )

    @property
    def _zone(self) -> str:
        return f"/instance/v1/zones/{self.zone}"

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Every server type of the zone at its hourly price in dollars (``usd_per_eur``),
        but those Scaleway reports in shortage; GPU types with their GPUs read into the catalog."""
        products: dict[str, JsonObject] = {}
        for page in range(1, MAX_PAGES + 1):
            answer = fields.as_object(self._http.call(
                "GET", f"{self._zone}/products/servers", "listing server types",
                params={"per_page": PAGE, "page": page},
            ))
            found = fields.obj(answer, "servers")
            if not found or found.keys() <= products.keys():
                break
            products.update({name: fields.as_object(product, f"server type {name}") for name, product in found.items()})
        available = fields.as_object(self._http.call(
            "GET", f"{self._zone}/products/servers/availability", "reading server type availability"
        ))
        stock = {
            name: fields.text(fields.as_object(v, f"the availability of {name}"), "availability", "")
            for name, v in fields.obj(available, "servers").items()
        }
        kinds = []
        for name, product in products.items():
            price = fields.number(product, "hourly_price", 0)
            if price <= 0 or stock.get(name) == SHORTAGE:
                continue
            gpus = fields.integer(product, "gpu", 0)
            info = fields.obj(product, "gpu_info")
            accelerator, memory = _accelerator(info) if gpus else (None, None)
            kinds.append(
                MachineType(
                    name=str(name),
                    vcpus=fields.number(product, "ncpus", 0),
                    memory_gb=fields.number(product, "ram", 0) / GIB,
                    price=round(price * self.usd_per_eur, 6),
                    region=self.zone,
                    accelerator=accelerator,
                    accelerator_count=gpus,
                    accelerator_memory_gb=memory,
                    architecture=_architecture(fields.text(product, "arch", "x86_64")),
                )
            )
        return kinds

    def create(self, order: Order) -> str:
        """One server of the order's type and image (a label such as ``ubuntu_noble`` or an
        image id) in the pool's security group (``order.group``'s, made here), its key in a
        tag, the boot script as cloud-init user data, then powered on. CapacityError when
        Scaleway has none to give (the server is deleted again)."""
        body: dict[str, object] = {
            "name": order.name,
            "commercial_type": order.machine_type.name,
            "image": order.image,
            "project": self.project,
            "tags": [TAG, order.group, KEY_TAG + order.public_key.strip().replace(" ", "_")],
            "security_group": self._made.of(order.group),
            "dynamic_ip_required": True,
            "enable_ipv6": False,
        }
        if order.disk_gb:
            body["volumes"] = {"0": {"size": int(order.disk_gb) * GB}}
        answer = self._capacity(order, lambda: self._http.call(
            "POST", f"{self._zone}/servers", f"creating server {order.name}", json=body
        ))
        server = fields.obj(fields.as_object(answer), "server")
        server_id = fields.text(server, "id")
        try:
            self._http.call(
                "PATCH", f"{self._zone}/servers/{server_id}/user_data/cloud-init",
                f"setting the user data of server {order.name}", text=order.user_data,
            )
            self._capacity(order, lambda: self._action(server_id, "poweron"))
        except BaseException:
            self._delete_stopped(server_id, server)
            raise
        return server_id

    def get(self, machine_id: str) -> Machine | None:
        """The server; one in a security group made here is reported running only once that
        group admits its address (``peer_rule``, added on the first such read)."""
        answer = self._http.read(f"{self._zone}/servers/{machine_id}", f"reading server {machine_id}")
        server = fields.obj(fields.as_object(answer), "server")
        if not server:
            return None
        machine = _machine(server)
        group_id = fields.text(fields.obj(server, "security_group"), "id", "")
        if machine.state == "running" and machine.ssh_host and group_id in self._made:
            self._admit(machine_id, group_id, machine.ssh_host)
        return machine

    def machines(self) -> list[Machine]:
        return [_machine(s) for s in self._pages("/servers", "servers", "listing servers", {"tags": TAG})]

    def delete(self, machine_id: str) -> None:
        """Terminate a server that runs (Scaleway deletes it with its volumes and dynamic
        address), delete one that is stopped with its volumes; then the rule that
        admitted its address."""
        answer = self._http.read(f"{self._zone}/servers/{machine_id}", f"reading server {machine_id}")
        server = fields.obj(fields.as_object(answer), "server")
        if server:
            state = fields.text(server, "state", "")
            if state in ("running", "starting"):
                self._action(machine_id, "terminate")
            elif state in ("stopped", "stopped in place"):
                self._delete_stopped(machine_id, server)
        group_id, rule = self._admitted.pop(machine_id, ("", ""))
        if rule:
            self._http.remove(f"{self._zone}/security_groups/{group_id}/rules/{rule}", f"deleting rule {rule}")

    def add_firewall(self, group: str) -> str:
        """A security group named ``group`` that drops inbound traffic but SSH (its servers'
        own addresses are admitted as they come up) and lets everything out; deleted
        again if its SSH rule cannot be added."""
        answer = self._http.call(
            "POST", f"{self._zone}/security_groups", f"creating security group {group}",
            json={
                "name": group,
                "project": self.project,
                "description": "skyward: SSH from anywhere, everything from the pool's own servers",
                "stateful": True,
                "inbound_default_policy": "drop",
                "outbound_default_policy": "accept",
                "tags": [TAG],
            },
        )
        group_id = fields.text(fields.obj(fields.as_object(answer), "security_group"), "id")
        with self._http.removed_on_error(f"{self._zone}/security_groups/{group_id}", f"deleting security group {group}"):
            self._http.call(
                "POST", f"{self._zone}/security_groups/{group_id}/rules",
                f"adding the SSH rule to security group {group}", json=SSH_RULE,
            )
        return self._made.add(group, group_id)

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        self._http.remove(f"{self._zone}/security_groups/{firewall_id}", f"deleting security group {group}")
        self._made.forget(group)

    def firewalls(self) -> list[Firewall]:
        return [
            Firewall(fields.text(g, "id"), fields.text(g, "name", ""))
            for g in self._pages("/security_groups", "security_groups", "listing security groups", {})
        ]

    def _capacity(self, order: Order, call: Callable[[], T]) -> T:
        """``call()``; CapacityError when Scaleway answers that it has no such server."""
        try:
            return call()
        except CloudAPIError as exc:
            kind = exc.body.get("type") if isinstance(exc.body, Mapping) else None
            said = message(exc.body).lower()
            if kind in NO_CAPACITY_TYPES or (exc.status in (409, 412, 503) and any(t in said for t in NO_CAPACITY)):
                raise CapacityError(
                    f"Scaleway has no {order.machine_type.name} in {self.zone}: {message(exc.body)}"
                ) from None
            raise

    def _action(self, server_id: str, action: str) -> None:
        self._http.call(
            "POST", f"{self._zone}/servers/{server_id}/action", f"asking server {server_id} to {action}",
            json={"action": action},
        )

    def _delete_stopped(self, server_id: str, server: JsonObject) -> None:
        """Delete a server that does not run, then the volumes it had."""
        self._http.remove(f"{self._zone}/servers/{server_id}", f"deleting server {server_id}")
        for volume in fields.obj(server, "volumes").values():
            volume_id = fields.text(volume, "id", "") if isinstance(volume, Mapping) else ""
            if volume_id:
                self._http.remove(f"{self._zone}/volumes/{volume_id}", f"deleting volume {volume_id}")

    def _admit(self, server_id: str, group_id: str, address: str) -> None:
        """Add ``peer_rule(address)`` to the group, once per server."""
        if server_id in self._admitted:
            return
        answer = self._http.call(
            "POST", f"{self._zone}/security_groups/{group_id}/rules",
            f"admitting server {server_id} to its pool's security group", json=peer_rule(address),
        )
        self._admitted[server_id] = (group_id, fields.text(fields.obj(fields.as_object(answer), "rule"), "id"))

    def _pages(self, path: str, key: str, what: str, params: Params) -> list[JsonObject]:
        """Every item of the zone's list at ``path``, page by page until an empty one (at
        most ``MAX_PAGES``: a page may hold fewer than ``per_page`` asked)."""
        listed: list[JsonObject] = []
        for page in range(1, MAX_PAGES + 1):
            answer = fields.as_object(self._http.call(
                "GET", f"{self._zone}{path}", what,
                params={**params, "project": self.project, "per_page": PAGE, "page": page},
            ))
            found = fields.objects(answer, key)
            if not found:
                break
            listed.extend(found)
        return listed


def _accelerator(info: JsonObject) -> tuple[str | None, float | None]:
    """A GPU type's ``gpu_info`` as the catalog reads it (``RTX-3070`` -> ``RTX_3070``) and
    one GPU's memory in GB (the API gives bytes); a name the catalog does not know is
    passed on as it is."""
    name = fields.text(info, "gpu_name", "").strip()
    memory = fields.number(info, "gpu_memory", 0) / GIB or None
    seen = identify(name) if name else None
    return (seen.model.name if seen is not None else (name or None)), (float(round(memory)) if memory else None)


def _architecture(arch: str) -> str:
    return {"arm64": "arm64", "arm": "arm64", "aarch64": "arm64"}.get(arch.lower(), arch.lower())


def _address(server: JsonObject) -> str | None:
    """The server's public IPv4 address: ``public_ips`` (routed IPs), else ``public_ip``."""
    for ip in fields.items(server, "public_ips"):
        if isinstance(ip, Mapping) and ip.get("address") and fields.text(ip, "family", "inet") == "inet":
            return fields.text(ip, "address")
    public = server.get("public_ip")
    return fields.text(public, "address") if isinstance(public, Mapping) and public.get("address") else None


def _machine(server: JsonObject) -> Machine:
    status = fields.text(server, "state", "")
    address = _address(server)
    state: MachineState = (
        "stopped" if status in STOPPED else ("running" if status == "running" and address else "starting")
    )
    return Machine(
        fields.text(server, "id"), fields.text(server, "name", ""), state, ssh_host=address,
        machine_type=fields.text(server, "commercial_type", ""), created=epoch(server.get("creation_date")),
    )
