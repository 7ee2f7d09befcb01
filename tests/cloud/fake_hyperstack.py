"""A local Hyperstack Infrahub API (``/v1``): ``GET /core/flavors``, ``GET /pricebook``,
``GET /core/images``, ``POST/GET /core/environments``, ``DELETE
/core/environments/{id}``, ``POST/GET /core/keypairs``, ``DELETE /core/keypair/{id}``,
``POST/GET /core/virtual-machines`` and ``GET/DELETE /core/virtual-machines/{id}``, in
Hyperstack's shapes (the ``{status, message, ...}`` envelope, integer ids, the
``api_key`` header). A request with a query parameter or a body field these operations
do not declare is refused (400, naming it), and so is a VM whose security rules are not
as Hyperstack documents them (direction, ethertype, protocol, a remote prefix of the
ethertype's family, ports only where the protocol has them). An environment is refused
deletion while it holds VMs or keypairs. Security rules are recorded, not enforced (the
lab's hosts share one bridge); a VM's fixed (private) address is its floating one here:
each lab host has one address. Every exchange is checked against Hyperstack's OpenAPI
document (``pinned``: tests/cloud/descriptions/hyperstack): prices are numbers, images
carry no creation time, a keypair's environment is an object, lists of environments,
keypairs and VMs come in pages with their ``count``, and an address not yet assigned is
left out rather than null (the document does not let it be null)."""

from __future__ import annotations

import datetime
import ipaddress
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

REGIONS = ("CANADA-1", "NORWAY-1", "US-1")


def _flavor(
    flavor_id: int,
    name: str,
    region: str,
    gpu: str,
    count: int,
    cpu: int,
    ram: float,
    stock: bool = True,
) -> dict[str, Any]:
    return {
        "id": flavor_id,
        "name": name,
        "region_name": region,
        "cpu": cpu,
        "ram": ram,
        "disk": 100,
        "ephemeral": 0,
        "gpu": gpu,
        "gpu_count": count,
        "stock_available": stock,
        "created_at": "2024-01-01T00:00:00.000+00:00",
        "labels": [],
        "features": {},
    }


FLAVORS = [
    _flavor(1, "n3-RTX-A6000x1", "CANADA-1", "RTX-A6000", 1, 28, 58.0),
    _flavor(2, "n3-RTX-A6000x2", "CANADA-1", "RTX-A6000", 2, 56, 116.0),
    _flavor(3, "n3-L40x1", "CANADA-1", "L40", 1, 28, 58.0),
    _flavor(4, "n3-H100x1", "CANADA-1", "H100-80G-PCIe", 1, 28, 180.0, stock=False),
    _flavor(5, "n3-A100x1", "NORWAY-1", "A100-80G-PCIe", 1, 28, 120.0),
    _flavor(6, "n3-RTX-A6000x1-spot", "CANADA-1", "RTX-A6000-spot", 1, 28, 58.0),
    _flavor(7, "n1-cpu-small", "CANADA-1", "", 0, 4, 4.0),
    _flavor(8, "n3-A100x1", "CANADA-1", "A100-80G-PCIe", 1, 28, 120.0),
]
PRICEBOOK = [
    {
        "id": n,
        "name": name,
        "value": float(value),
        "original_value": float(value),
        "discount_applied": False,
    }
    for n, (name, value) in enumerate(
        [
            ("RTX-A6000", "0.50"),
            ("L40", "1.00"),
            ("H100-80G-PCIe", "1.90"),
            ("A100-80G-PCIe", "1.35"),
            ("RTX-A6000-spot", "0.25"),
        ],
        start=1,
    )
]
IMAGES = [
    {"id": 11, "name": "Ubuntu Server 22.04 LTS"},
    {"id": 13, "name": "Ubuntu Server 24.04 LTS R570 CUDA 12.8"},
    {"id": 12, "name": "Ubuntu Server 22.04 LTS R535 CUDA 12.2"},
]
"""Hyperstack's images carry no creation time (its OpenAPI document): listed here out of order."""
STATUS = {"booting": "BUILD", "running": "ACTIVE", "exited": "SHUTOFF", "deleted": "DELETED"}
RULE = shape("direction", "ethertype", "protocol", "remote_ip_prefix", "port_range_min", "port_range_max")
"""A security rule (``CreateSecurityRulePayload``)."""
OPERATIONS = (
    Operation("GET", "/core/flavors", ("region",)),
    Operation("GET", "/pricebook"),
    Operation("GET", "/core/images", ("region",)),
    Operation("GET", "/core/environments", ("page", "pageSize")),
    Operation("POST", "/core/environments", body=shape("name", "region", features=shape("network_optimised"))),
    Operation("DELETE", "/core/environments/{id}"),
    Operation("GET", "/core/keypairs", ("page", "pageSize")),
    Operation("POST", "/core/keypairs", body=shape("name", "environment_name", "public_key")),
    Operation("DELETE", "/core/keypair/{id}"),
    Operation("GET", "/core/virtual-machines", ("page", "pageSize")),
    Operation("POST", "/core/virtual-machines", body=shape(
        "name", "environment_name", "image_name", "volume_name", "create_bootable_volume", "flavor_name", "flavor",
        "key_name", "user_data", "callback_url", "assign_floating_ip", "enable_port_randomization", "labels", "count",
        security_rules=RULE, profile=shape("name", "description"),
    )),
    Operation("GET", "/core/virtual-machines/{vm_id}"),
    Operation("DELETE", "/core/virtual-machines/{vm_id}"),
)
"""The operations of Hyperstack's Infrahub API the fake serves, with the fields it documents."""
PROTOCOLS = (
    "any", "ah", "dccp", "egp", "esp", "gre", "icmp", "icmpv6", "igmp", "ipip", "ipv6-encap", "ipv6-frag",
    "ipv6-icmp", "ipv6-nonxt", "ipv6-opts", "ipv6-route", "ospf", "pgm", "rsvp", "sctp", "tcp", "udp", "udplite",
    "vrrp",
)
"""The protocols a security rule may name (``GET /core/sg-rules-protocols``)."""
PORT_LIMITS = {
    **dict.fromkeys(("tcp", "udp", "sctp", "dccp", "udplite"), (1, 65535)),
    **dict.fromkeys(("icmp", "icmpv6", "ipv6-icmp"), (0, 255)),
}
"""The protocols whose rules may give ``port_range_min``/``max`` (ICMP: its type and code), and their bounds."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def _fail(status: int, text: str) -> Answer:
    return Answer(status, {"status": False, "message": text, "error_reason": text})


class FakeHyperstack(FakeCloud):
    name = "hyperstack"
    prefix = "/v1"
    credentials = {"HYPERSTACK_API_KEY": TOKEN}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "hyperstack"
    page_size = 30
    """The size of a page of environments or keypairs when the request gives none."""

    def __init__(self) -> None:
        super().__init__()
        self.environments: dict[str, dict[str, Any]] = {}

    def authorized(self, headers: Any) -> bool:
        return headers.get("api_key") == TOKEN

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, text)

    def no_capacity(self, kind: str) -> Answer:
        return _fail(
            400, f"Not enough resources available to deploy flavor {kind}, try again later"
        )

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/core/flavors"):
            return self._flavors(query.get("region"))
        if (method, path) == ("GET", "/pricebook"):
            return PRICEBOOK
        if (method, path) == ("GET", "/core/images"):
            region = query.get("region", "CANADA-1")
            images = [
                {**i, "region_name": region, "type": "Ubuntu", "version": "", "is_public": True}
                for i in IMAGES
            ]
            return {
                "status": True,
                "message": "Getting images success",
                "images": [{"region_name": region, "type": "Ubuntu", "logo": "", "images": images}],
            }
        if path == "/core/environments":
            if method == "POST":
                return {
                    "status": True,
                    "message": "Environment created",
                    "environment": self._environment(body),
                }
            return self._page("environments", list(self.environments.values()), query)
        if path.startswith("/core/environments/") and method == "DELETE":
            return self._delete_environment(path.rsplit("/", 1)[1])
        if path == "/core/keypairs":
            if method == "POST":
                return {
                    "status": True,
                    "message": "Keypair imported",
                    "keypair": self._keypair(body),
                }
            return self._page("keypairs", list(self.keys.values()), query)
        if path.startswith("/core/keypair/") and method == "DELETE":
            if self.keys.pop(path.rsplit("/", 1)[1], None) is None:
                raise _fail(404, "Keypair not found")
            return {"status": True, "message": "Keypair deleted"}
        if path == "/core/virtual-machines":
            if method == "POST":
                machine = self._create(body)
                return {
                    "status": True,
                    "message": "Creating 1 virtual machine(s)",
                    "instances": [self._vm(machine)],
                }
            return self._list(int(query.get("page", 1)), int(query.get("pageSize", 30)))
        if path.startswith("/core/virtual-machines/"):
            machine = self.machines.get(path.rsplit("/", 1)[1])
            if machine is None or machine.state == "deleted":
                raise _fail(404, "Virtual machine not found")
            if method == "DELETE":
                self.delete(machine.id)
                return {"status": True, "message": "Virtual machine deleted"}
            return {"status": True, "message": "Success", "instance": self._vm(machine)}
        raise self.no_route(method, path)

    def _page(self, key: str, items: list[Any], query: dict[str, str]) -> dict[str, Any]:
        """One page of ``items`` (``page``, ``pageSize``) under ``key``, with the count of all."""
        page, size = int(query.get("page", 1)), int(query.get("pageSize", self.page_size))
        return {"status": True, "message": "Success", key: items[(page - 1) * size : page * size],
                "count": len(items), "page": page, "page_size": size}

    def _flavors(self, region: str | None) -> dict[str, Any]:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for flavor in FLAVORS:
            if region is None or flavor["region_name"] == region:
                groups.setdefault((flavor["gpu"], flavor["region_name"]), []).append(flavor)
        data = [
            {"gpu": gpu, "region_name": place, "flavors": flavors}
            for (gpu, place), flavors in groups.items()
        ]
        return {"status": True, "message": "Success", "data": data}

    def _environment(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("region") not in REGIONS:
            raise _fail(400, f"Invalid region {body.get('region')}")
        if any(e["name"] == body.get("name") for e in self.environments.values()):
            raise _fail(409, f"Environment {body.get('name')} already exists")
        environment = {
            "id": int(self.new_id()),
            "name": body["name"],
            "region": body["region"],
            "created_at": _now(),
            "features": {"network_optimised": False},
        }
        self.environments[str(environment["id"])] = environment
        return environment

    def _delete_environment(self, environment_id: str) -> dict[str, Any]:
        environment = self.environments.get(environment_id)
        if environment is None:
            raise _fail(404, "Environment not found")
        name = environment["name"]
        if self.live_in(name) or any(k["environment"]["name"] == name for k in self.keys.values()):
            raise _fail(400, f"Environment {name} still has resources; delete them first")
        del self.environments[environment_id]
        return {"status": True, "message": "Environment deleted"}

    def _keypair(self, body: dict[str, Any]) -> dict[str, Any]:
        environment = next((e for e in self.environments.values() if e["name"] == body.get("environment_name")), None)
        if environment is None:
            raise _fail(404, f"Environment {body.get('environment_name')} not found")
        if not str(body.get("public_key", "")).startswith("ssh-"):
            raise _fail(400, "Invalid public key")
        keypair = {
            "id": int(self.new_id()),
            "name": body["name"],
            "environment": environment,
            "public_key": body["public_key"],
            "fingerprint": "SHA256:fake",
            "created_at": _now(),
        }
        self.keys[str(keypair["id"])] = keypair
        return keypair

    def _create(self, body: dict[str, Any]) -> FakeMachine:
        environment = next(
            (e for e in self.environments.values() if e["name"] == body.get("environment_name")),
            None,
        )
        if environment is None:
            raise _fail(404, f"Environment {body.get('environment_name')} not found")
        flavor = next((f for f in FLAVORS if f["name"] == body.get("flavor_name")), None)
        if flavor is None or flavor["region_name"] != environment["region"]:
            raise _fail(
                400, f"Flavor {body.get('flavor_name')} is not available in {environment['region']}"
            )
        if not flavor["stock_available"]:
            raise self.no_capacity(flavor["name"])
        key = next(
            (
                k
                for k in self.keys.values()
                if k["name"] == body.get("key_name") and k["environment"]["name"] == environment["name"]
            ),
            None,
        )
        if key is None:
            raise _fail(
                404,
                f"Keypair {body.get('key_name')} not found in environment {environment['name']}",
            )
        if body.get("image_name") not in {i["name"] for i in IMAGES}:
            raise _fail(400, f"Image {body.get('image_name')} not found")
        if body.get("count") != 1 or len(str(body.get("name", ""))) > 50:
            raise _fail(400, "Invalid count or name")
        for n, rule in enumerate(body.get("security_rules") or []):
            _check_rule(rule, f"security_rules[{n}]")
        gpu = flavor["gpu"]
        price = next(float(p["value"]) for p in PRICEBOOK if p["name"] == gpu) * flavor["gpu_count"]
        return self.add(
            body["name"],
            flavor["name"],
            gpu.endswith("-spot"),
            body["image_name"],
            key["public_key"],
            price,
            region=environment["region"],
            environment=environment,
            rules=body.get("security_rules", []),
            user_data=body.get("user_data", ""),
            floating=body.get("assign_floating_ip", False),
        )

    def live_in(self, environment: str) -> list[FakeMachine]:
        """The VMs of ``environment`` not deleted."""
        return [
            m for m in self.live() if (m.extra.get("environment") or {}).get("name") == environment
        ]

    def _list(self, page: int, size: int) -> dict[str, Any]:
        machines = [m for m in self.machines.values() if m.state != "deleted"]
        chosen = machines[(page - 1) * size : page * size]
        return {
            "status": True,
            "message": "Success",
            "instances": [self._vm(m) for m in chosen],
            "count": len(machines),
            "page": page,
            "page_size": size,
        }

    def _vm(self, machine: FakeMachine) -> dict[str, Any]:
        up = machine.state == "running"
        flavor = next((f for f in FLAVORS if f["name"] == machine.kind), {"name": machine.kind})
        environment = machine.extra.get("environment") or {
            "id": 0,
            "name": "default",
            "region": "CANADA-1",
        }
        public = machine.address if up and machine.extra.get("floating", True) else None
        addresses = {"fixed_ip": machine.address} if up else {}
        if public:
            addresses["floating_ip"] = public
        return {
            "id": int(machine.id),
            "name": machine.name,
            "status": STATUS.get(machine.state, "BUILD"),
            "power_state": "RUNNING" if up else "NOSTATE",
            "vm_state": "active" if up else "building",
            **addresses,
            "floating_ip_status": "ATTACHED" if public else "NOT_ATTACHED",
            "flavor": {
                k: flavor[k] for k in ("name", "cpu", "ram", "disk", "gpu", "gpu_count") if k in flavor
            },
            "environment": {k: environment[k] for k in ("id", "name", "region")},
            "image": {"name": machine.image},
            "keypair": {"name": environment["name"]},
            "security_rules": machine.extra.get("rules", []),
            "created_at": datetime.datetime.fromtimestamp(machine.created, datetime.UTC).isoformat(
                timespec="milliseconds"),
        }


def _check_rule(rule: dict[str, Any], where: str) -> None:
    """A security rule as Hyperstack documents it, else its 400 answer naming the field:
    ``direction`` ingress or egress, ``ethertype`` IPv4 or IPv6, a known ``protocol``, a
    ``remote_ip_prefix`` of the ethertype's family, and ports (both, the lower first,
    within the protocol's bounds) only for a protocol that has them."""
    for name in ("direction", "ethertype", "protocol", "remote_ip_prefix"):
        if name not in rule:
            raise _fail(400, f"{where}.{name} is required")
    for name, allowed in (("direction", ("ingress", "egress")), ("ethertype", ("IPv4", "IPv6")), ("protocol", PROTOCOLS)):
        if rule[name] not in allowed:
            raise _fail(400, f"{where}.{name} must be one of {', '.join(allowed)}, not {rule[name]!r}")
    try:
        network = ipaddress.ip_network(str(rule["remote_ip_prefix"]))
    except ValueError:
        raise _fail(400, f"{where}.remote_ip_prefix {rule['remote_ip_prefix']!r} is not a CIDR") from None
    if f"IPv{network.version}" != rule["ethertype"]:
        raise _fail(400, f"{where}.remote_ip_prefix {network} is not an {rule['ethertype']} network")
    first, last = rule.get("port_range_min"), rule.get("port_range_max")
    if first is None and last is None:
        return
    low, high = PORT_LIMITS.get(rule["protocol"], (1, 0))
    if not (type(first) is int and type(last) is int and low <= first <= last <= high):
        raise _fail(400, f"{where}.port_range_min/max {first}..{last} are not a port range of protocol {rule['protocol']}")
