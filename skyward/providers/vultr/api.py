"""Vultr's API v2 (``api.vultr.com/v2``) as ``MachineAPI`` and ``FirewallAPI``: regions
(``GET /regions``), plans and their prices (``GET /plans``), SSH keys (``POST/GET
/ssh-keys``, ``DELETE /ssh-keys/{id}``), instances (``POST /instances``, ``GET
/instances?tag=skyward``, ``GET/DELETE /instances/{id}``) and firewall groups (``POST/GET
/firewalls``, ``POST /firewalls/{id}/rules``, ``DELETE /firewalls/{id}/rules/{n}`` and
``DELETE /firewalls/{id}``). Every instance is tagged ``skyward`` and with its pool's
group and sits in its pool's firewall group, which admits SSH from anywhere and, once the
instance has an address, everything from that address (its peers reach it at their
public addresses: that is where SSH arrives, so where Ray and the lanes listen). Lists
are paged by cursor (``meta.links.next``). The key travels as ``Authorization: Bearer``:
``api_key=``, ``$VULTR_API_KEY`` or ``api-key`` in vultr-cli's ``~/.vultr-cli.yaml``."""

from __future__ import annotations

import base64

from skyward.core.accelerator_catalog import identify
from skyward.core.validation import fail
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Firewall, Key, Machine, MachineState, MachineType, MadeFirewalls, Order, epoch
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import Params, bearer_client, capacity_errors

URL = "https://api.vultr.com/v2"
API_KEY = credentials.Source(("VULTR_API_KEY",), "~/.vultr-cli.yaml", "api-key")
TAG = "skyward"
PAGE = 500
"""Vultr's largest page."""
NO_CAPACITY = ("not available", "unavailable", "out of stock", "sold out", "capacity", "no stock")
ALL_PORTS = "1:65535"
NO_ADDRESS = ("", "0.0.0.0")
"""What ``main_ip`` reads before an address is assigned."""
MAX_RULES = 50
"""The rules a firewall group holds (its ``max_rule_count``)."""
PEER_PROTOCOLS = ("tcp", "udp")
WHOLE = 0.9
"""The share of a GPU's listed memory a plan must hold to count as that whole GPU."""
HOURS_PER_MONTH = 730
"""What a plan's monthly cost is divided by when it gives no hourly cost."""


SSH_RULE = {
    "ip_type": "v4",
    "protocol": "tcp",
    "subnet": "0.0.0.0",
    "subnet_size": 0,
    "port": "22",
    "notes": "skyward: SSH",
}
"""The rule a pool's firewall group is made with: inbound SSH from anywhere."""
MAX_NODES = (MAX_RULES - 1) // len(PEER_PROTOCOLS)
"""The most instances one firewall group can admit (two rules each, after SSH's)."""


def peer_rules(address: str) -> list[dict[str, object]]:
    """Inbound TCP and UDP, every port, from one instance of the pool."""
    return [
        {
            "ip_type": "v4",
            "protocol": protocol,
            "subnet": address,
            "subnet_size": 32,
            "port": ALL_PORTS,
            "notes": "skyward: pool peer",
        }
        for protocol in PEER_PROTOCOLS
    ]


class VultrAPI:
    """Calls Vultr with ``api_key`` (None: ``$VULTR_API_KEY``, then ``~/.vultr-cli.yaml``)."""

    def __init__(self, api_key: str | None = None) -> None:
        key = credentials.given_or_found("Vultr", api_key, API_KEY)
        self._regions: list[str] | None = None
        self._made = MadeFirewalls("Vultr", "firewall group", "an instance")
        """The firewall group this client made for each group (``add_firewall``)."""
        self._admitted: dict[str, tuple[str, list[str]]] = {}
        """Per instance: its firewall group and the rules that admit its address."""
        self._http = bearer_client("Vultr", "vultr", URL, key, f"Vultr(api_key=...) or {API_KEY.describe()}")

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Every plan sold in ``region`` (None: everywhere) at its hourly cost (its monthly
        cost / 730 where it gives none); a GPU plan with less than one whole GPU (a vGPU
        share) is not offered. ValueError for a region Vultr does not have."""
        if region is not None:
            self._check_region(region)
        kinds = []
        for plan in self._pages("/plans", "plans", "listing plans"):
            hourly = _hourly(plan)
            if hourly is None:
                continue
            gpu = _gpu(plan)
            if gpu is not None and gpu[1] < 1:
                continue
            accelerator, count, memory = gpu if gpu is not None else (None, 0, None)
            for place in fields.items(plan, "locations"):
                if region is not None and place != region:
                    continue
                kinds.append(
                    MachineType(
                        name=fields.text(plan, "id"),
                        vcpus=fields.number(plan, "vcpu_count", 0),
                        memory_gb=fields.number(plan, "ram", 0) / 1024,
                        price=hourly,
                        region=str(place),
                        accelerator=accelerator,
                        accelerator_count=count,
                        accelerator_memory_gb=memory,
                        disk_gb=fields.number(plan, "disk", 0) or None,
                    )
                )
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        answer = self._http.call(
            "POST",
            "/ssh-keys",
            f"adding SSH key {name}",
            json={"name": name, "ssh_key": public_key},
        )
        return fields.text(fields.obj(fields.as_object(answer), "ssh_key"), "id")

    def remove_key(self, key_id: str) -> None:
        self._http.remove(f"/ssh-keys/{key_id}", f"deleting SSH key {key_id}")

    def keys(self) -> list[Key]:
        return [
            Key(fields.text(k, "id"), fields.text(k, "name", ""))
            for k in self._pages("/ssh-keys", "ssh_keys", "listing SSH keys")
        ]

    def create(self, order: Order) -> str:
        """One instance of the order's plan in its region, of ``order.image`` (an OS id),
        with the pool's key, tags and firewall group (``order.group``'s, made here), the
        boot script as (base64) user data. CapacityError when Vultr has none to give."""
        body: dict[str, object] = {
            "region": order.machine_type.region,
            "plan": order.machine_type.name,
            "os_id": int(order.image),
            "label": order.name,
            "hostname": order.name,
            "sshkey_id": [order.key_id] if order.key_id else [],
            "tags": [TAG, order.group],
            "firewall_group_id": self._made.of(order.group),
            "user_scheme": "root",
            "user_data": base64.b64encode(order.user_data.encode()).decode(),
            "backups": "disabled",
            "activation_email": False,
        }
        kind = order.machine_type
        with capacity_errors(NO_CAPACITY, f"Vultr has no {kind.name} in {kind.region}", statuses=(400, 406, 412)):
            answer = self._http.call("POST", "/instances", f"creating instance {order.name}", json=body)
        return fields.text(fields.obj(fields.as_object(answer), "instance"), "id")

    def get(self, machine_id: str) -> Machine | None:
        """The instance; one in a firewall group made here is reported running only once
        that group admits its address (``peer_rules``, added on the first such read)."""
        answer = self._http.read(f"/instances/{machine_id}", f"reading instance {machine_id}")
        instance = fields.obj(fields.as_object(answer), "instance")
        if not instance:
            return None
        machine = _machine(instance)
        group_id = fields.text(instance, "firewall_group_id", "")
        if machine.state == "running" and machine.ssh_host and group_id in self._made:
            self._admit(machine_id, group_id, machine.ssh_host)
        return machine

    def machines(self) -> list[Machine]:
        return [
            _machine(i)
            for i in self._pages("/instances", "instances", "listing instances", {"tag": TAG})
        ]

    def delete(self, machine_id: str) -> None:
        """The instance, then the rules that admitted its address."""
        self._http.remove(f"/instances/{machine_id}", f"deleting instance {machine_id}")
        group_id, rules = self._admitted.pop(machine_id, ("", []))
        for rule in rules:
            self._http.remove(
                f"/firewalls/{group_id}/rules/{rule}",
                f"deleting rule {rule} of firewall group {group_id}",
            )

    def add_firewall(self, group: str) -> str:
        """A firewall group described as ``group`` that admits SSH from anywhere (Vultr drops
        inbound traffic that no rule accepts; its instances' own addresses are admitted as
        they come up); deleted again if the rule cannot be added."""
        answer = self._http.call(
            "POST", "/firewalls", f"creating firewall group {group}", json={"description": group}
        )
        firewall_id = fields.text(fields.obj(fields.as_object(answer), "firewall_group"), "id")
        with self._http.removed_on_error(f"/firewalls/{firewall_id}", f"deleting firewall group {group}"):
            self._http.call(
                "POST",
                f"/firewalls/{firewall_id}/rules",
                f"adding the SSH rule to firewall group {group}",
                json=SSH_RULE,
            )
        return self._made.add(group, firewall_id)

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        self._http.remove(f"/firewalls/{firewall_id}", f"deleting firewall group {group}")
        self._made.forget(group)

    def firewalls(self) -> list[Firewall]:
        return [
            Firewall(fields.text(f, "id"), fields.text(f, "description", ""))
            for f in self._pages("/firewalls", "firewall_groups", "listing firewall groups")
        ]

    def _admit(self, machine_id: str, group_id: str, address: str) -> None:
        """Add ``peer_rules(address)`` to the group, once per instance."""
        if machine_id in self._admitted:
            return
        rules: list[str] = []
        self._admitted[machine_id] = (group_id, rules)
        for rule in peer_rules(address):
            answer = self._http.call(
                "POST",
                f"/firewalls/{group_id}/rules",
                f"admitting instance {machine_id} to its pool's firewall group",
                json=rule,
            )
            rules.append(fields.text(fields.obj(fields.as_object(answer), "firewall_rule"), "id"))

    def _check_region(self, region: str) -> None:
        if self._regions is None:
            self._regions = sorted(
                fields.text(r, "id") for r in self._pages("/regions", "regions", "listing regions")
            )
        if region not in self._regions:
            raise fail("Vultr", "region", region, f"Vultr's regions are {', '.join(self._regions)}")

    def _pages(
        self, path: str, key: str, what: str, params: Params | None = None
    ) -> list[JsonObject]:
        """Every item of a list, page by page (at most 50 pages)."""
        found: list[JsonObject] = []
        cursor = ""
        for _ in range(50):
            query = {**(params or {}), "per_page": PAGE, **({"cursor": cursor} if cursor else {})}
            answer = fields.as_object(self._http.call("GET", path, what, params=query))
            found.extend(fields.objects(answer, key))
            cursor = fields.text(fields.obj(fields.obj(answer, "meta"), "links"), "next", "")
            if not cursor:
                break
        return found


def _hourly(plan: JsonObject) -> float | None:
    """The plan's hourly price in dollars (None: it gives none)."""
    for value, divisor in (
        (plan.get("hourly_cost"), 1),
        (plan.get("monthly_cost"), HOURS_PER_MONTH),
    ):
        try:
            price = float(value or 0) / divisor if isinstance(value, (str, int, float, type(None))) else 0.0
        except ValueError:
            continue
        if price > 0:
            return price
    return None


def _gpu(plan: JsonObject) -> tuple[str, int, float | None] | None:
    """A GPU plan's accelerator as the catalog reads it (``NVIDIA_HGX_H100`` -> ``H100``),
    how many whole GPUs its ``gpu_vram_gb`` holds (0 for a vGPU share of one) and each
    one's memory; None for a plan without a GPU. A GPU the catalog does not know counts
    as one, with all the plan's memory."""
    kind = fields.text(plan, "gpu_type", "")
    if not kind or kind.lower() == "none":
        return None
    total = fields.number(plan, "gpu_vram_gb", 0)
    seen = identify(kind.replace("_", " ").replace("HGX ", ""))
    if seen is None:
        return kind, 1, total or None
    each = float(seen.model.variants[0].memory_gb)
    return seen.model.name, round(total / each) if total >= WHOLE * each else 0, each


def _machine(instance: JsonObject) -> Machine:
    status = fields.text(instance, "status", "")
    power = fields.text(instance, "power_status", "")
    public = fields.text(instance, "main_ip", "")
    state: MachineState = (
        "stopped"
        if power == "stopped" and status == "active"
        else "running"
        if status == "active" and power == "running" and public not in NO_ADDRESS
        else "starting"
    )
    created = epoch(instance.get("date_created"))
    return Machine(
        fields.text(instance, "id"), fields.text(instance, "label", ""), state,
        ssh_host=public if public not in NO_ADDRESS else None,
        machine_type=fields.text(instance, "plan", ""), created=created,
    )
