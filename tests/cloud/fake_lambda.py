"""A local Lambda Cloud API (``/api/v1``): ``GET /instance-types``, ``GET/POST
/ssh-keys``, ``DELETE /ssh-keys/{id}``, ``POST /instance-operations/launch`` and
``/terminate``, ``GET /instances``, ``GET /instances/{id}``, ``GET/POST
/firewall-rulesets`` and ``GET/DELETE /firewall-rulesets/{id}``, in Lambda's shapes (the
``{"data": ...}`` envelope, errors as ``{"error": {code, message, suggestion}}``, the
Bearer key). A request with a query parameter or a body field these operations do not
declare is refused (400 ``global/invalid-parameters``, naming it). A launch is refused without capacity when its region is not among the
type's ``regions_with_capacity_available``; a ruleset is refused deletion while an
instance not terminated uses it. Rulesets are recorded, not enforced (the lab's hosts
share one bridge); an instance's private address is its public one here: each lab host
has one address."""

from __future__ import annotations

import ipaddress
import re
import uuid
from typing import Any

from cloud.fake_cloud import TOKEN, Answer, FakeCloud, FakeMachine, Operation, shape

REGIONS = {
    "us-east-1": "Virginia, USA",
    "us-west-1": "California, USA",
    "us-west-3": "Utah, USA",
    "us-south-1": "Texas, USA",
}


def _type(
    name: str,
    gpu: str,
    gpus: int,
    vcpus: int,
    memory: int,
    storage: int,
    cents: int,
    regions: list[str],
) -> dict[str, Any]:
    return {
        "instance_type": {
            "name": name,
            "description": f"{gpus}x {gpu}",
            "gpu_description": gpu,
            "price_cents_per_hour": cents,
            "specs": {"vcpus": vcpus, "memory_gib": memory, "storage_gib": storage, "gpus": gpus},
        },
        "regions_with_capacity_available": [
            {"name": r, "description": REGIONS[r]} for r in regions
        ],
    }


TYPES = {
    t["instance_type"]["name"]: t
    for t in (
        _type("gpu_1x_a10", "A10 (24 GB PCIe)", 1, 30, 200, 1400, 75, ["us-east-1", "us-west-1"]),
        _type("gpu_1x_a100_sxm4", "A100 (40 GB SXM4)", 1, 30, 200, 512, 129, ["us-east-1"]),
        _type("gpu_8x_a100_80gb_sxm4", "A100 (80 GB SXM4)", 8, 240, 1800, 20000, 1432, []),
        _type("gpu_1x_h100_pcie", "H100 (80 GB PCIe)", 1, 26, 200, 1000, 249, ["us-west-3"]),
        _type("gpu_1x_rtx6000", "RTX 6000 (24 GB)", 1, 14, 46, 512, 50, ["us-south-1"]),
    )
}
FAMILIES = ("lambda-stack-22-04", "lambda-stack-24-04", "ubuntu-22-04")
ACTIONS = ("migrate", "rebuild", "restart", "cold_reboot", "terminate")
"""What an instance's ``actions`` tell of each: whether it can be done now."""
STATUS = {"booting": "booting", "running": "active", "exited": "unhealthy", "deleted": "terminated"}
NAME = re.compile(r"^.{0,64}$")
OPERATIONS = (
    Operation("GET", "/instance-types"),
    Operation("GET", "/ssh-keys"),
    Operation("POST", "/ssh-keys", body=shape("name", "public_key")),
    Operation("DELETE", "/ssh-keys/{id}"),
    Operation("POST", "/instance-operations/launch", body=shape(
        "region_name", "instance_type_name", "ssh_key_names", "file_system_names", "hostname", "name", "user_data",
        file_system_mounts=shape("mount_point", "file_system_id"), image=shape("id", "family"),
        tags=shape("key", "value"), firewall_rulesets=shape("id"),
    )),
    Operation("POST", "/instance-operations/terminate", body=shape("instance_ids")),
    Operation("GET", "/instances"),
    Operation("GET", "/instances/{id}"),
    Operation("GET", "/firewall-rulesets"),
    Operation("POST", "/firewall-rulesets", body=shape(
        "name", "region", rules=shape("protocol", "port_range", "source_network", "description"),
    )),
    Operation("GET", "/firewall-rulesets/{id}"),
    Operation("DELETE", "/firewall-rulesets/{id}"),
)
"""The operations of Lambda's Cloud API v1 the fake serves, with the fields it documents."""
ERROR_CODES = {400: "global/invalid-parameters", 404: "global/not-found", 405: "global/method-not-allowed"}


def _fail(status: int, code: str, text: str, suggestion: str = "") -> Answer:
    error = {"code": code, "message": text}
    if suggestion:
        error["suggestion"] = suggestion
    return Answer(status, {"error": error})


def _invalid(text: str) -> Answer:
    return _fail(400, "global/invalid-parameters", text)


def _missing(what: str, suggestion: str = "") -> Answer:
    return _fail(404, "global/object-does-not-exist", f"Specified {what} does not exist.", suggestion)


def _not_launched(what: str) -> Answer:
    """A launch's 404: Lambda names what it could not find and suggests a fix."""
    return _missing(what, f"Check the {what} and try again.")


class FakeLambda(FakeCloud):
    name = "lambda"
    prefix = "/api/v1"
    credentials = {"LAMBDA_API_KEY": TOKEN}  # noqa: RUF012 (as FakeCloud declares it)
    operations = OPERATIONS
    pinned = "lambda"

    def error(self, status: int, text: str) -> Answer:
        return _fail(status, ERROR_CODES.get(status, "global/unknown"), text)

    def unauthorized(self) -> Answer:
        return _fail(401, "global/invalid-api-key", "API key was invalid, expired, or deleted.",
                     "Check your API key or create a new one, then try again.")

    def no_capacity(self, kind: str) -> Answer:
        return _fail(
            400,
            "instance-operations/launch/insufficient-capacity",
            "Not enough capacity to fulfill launch request.",
            "Choose an instance type with more availability, or try again later.",
        )

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/instance-types"):
            return {"data": TYPES}
        if path == "/ssh-keys":
            if method == "POST":
                return {"data": self._key(body)}
            return {"data": list(self.keys.values())}
        if path.startswith("/ssh-keys/") and method == "DELETE":
            if self.keys.pop(path.rsplit("/", 1)[1], None) is None:
                raise _fail(404, "global/not-found", "The requested resource was not found.")
            return {"data": {}}
        if (method, path) == ("POST", "/instance-operations/launch"):
            return {"data": {"instance_ids": [self._launch(body).id]}}
        if (method, path) == ("POST", "/instance-operations/terminate"):
            return {"data": {"terminated_instances": self._terminate(body)}}
        if (method, path) == ("GET", "/instances"):
            return {"data": [self._instance(m) for m in self.live()]}
        if path.startswith("/instances/") and method == "GET":
            machine = self.machines.get(path.rsplit("/", 1)[1])
            if machine is None or machine.state == "deleted":
                raise _missing("instance")
            return {"data": self._instance(machine)}
        if path == "/firewall-rulesets":
            if method == "POST":
                return {"data": self._ruleset(body)}
            return {"data": [self._shown(r) for r in self.firewalls.values()]}
        if path.startswith("/firewall-rulesets/"):
            ruleset = self.firewalls.get(path.rsplit("/", 1)[1])
            if ruleset is None:
                raise _fail(
                    404,
                    "global/object-does-not-exist",
                    "Firewall ruleset does not exist or you do not have permission to access it.",
                    "Check your firewall ruleset ID and try again.",
                )
            if method == "DELETE":
                if self.users_of(ruleset["id"]):
                    raise _fail(
                        400,
                        "firewall-rulesets/firewall-ruleset-in-use",
                        "Firewall ruleset is in use by one or more instances.",
                        "Terminate all instances that are using the ruleset before deleting it.",
                    )
                del self.firewalls[ruleset["id"]]
                return {"data": {}}
            return {"data": self._shown(ruleset)}
        raise self.no_route(method, path)

    def users_of(self, ruleset_id: str) -> list[FakeMachine]:
        """The instances not terminated that have the ruleset."""
        return [m for m in self.live() if ruleset_id in m.extra.get("rulesets", [])]

    def _key(self, body: dict[str, Any]) -> dict[str, Any]:
        name, public_key = str(body.get("name") or ""), str(body.get("public_key") or "")
        if not name or len(name) > 64 or any(k["name"] == name for k in self.keys.values()):
            raise _invalid(f"Invalid or duplicate SSH key name {name!r}.")
        if not public_key.startswith("ssh-"):
            raise _invalid("Invalid public key.")
        key = {"id": uuid.uuid4().hex, "name": name, "public_key": public_key}
        self.keys[key["id"]] = key
        return key

    def _ruleset(self, body: dict[str, Any]) -> dict[str, Any]:
        name, region = str(body.get("name") or ""), body.get("region")
        if not name or len(name) > 64:
            raise _invalid(f"Invalid ruleset name {name!r}.")
        if region not in REGIONS:
            raise _invalid(f"Invalid region {region!r}.")
        for rule in body.get("rules") or []:
            _check_rule(rule)
        ruleset = {
            "id": uuid.uuid4().hex,
            "name": name,
            "region": region,
            "rules": body.get("rules") or [],
            "created": "2026-01-01T00:00:00Z",
        }
        self.firewalls[ruleset["id"]] = ruleset
        return self._shown(ruleset)

    def _shown(self, ruleset: dict[str, Any]) -> dict[str, Any]:
        region = ruleset["region"]
        return {
            **ruleset,
            "region": {"name": region, "description": REGIONS[region]},
            "instance_ids": [m.id for m in self.users_of(ruleset["id"])],
        }

    def _launch(self, body: dict[str, Any]) -> FakeMachine:
        region, kind = body.get("region_name"), body.get("instance_type_name")
        if region not in REGIONS:
            raise _invalid(f"Invalid region {region!r}.")
        if kind not in TYPES:
            raise _not_launched("instance type")
        keys = body.get("ssh_key_names") or []
        if len(keys) != 1:
            raise _invalid("Exactly one SSH key must be specified.")
        key = next((k for k in self.keys.values() if k["name"] == keys[0]), None)
        if key is None:
            raise _not_launched("SSH key")
        rulesets = [str(r.get("id")) for r in body.get("firewall_rulesets") or []]
        for ruleset_id in rulesets:
            if ruleset_id not in self.firewalls or self.firewalls[ruleset_id]["region"] != region:
                raise _invalid(f"Firewall ruleset {ruleset_id} does not exist in {region}.")
        family = (body.get("image") or {}).get("family", FAMILIES[0])
        if family not in FAMILIES:
            raise _not_launched("image family")
        if not NAME.match(str(body.get("name", ""))) or not isinstance(
            body.get("user_data", ""), str
        ):
            raise _invalid("Invalid name or user_data.")
        offered = {r["name"] for r in TYPES[kind]["regions_with_capacity_available"]}
        if region not in offered:
            raise self.no_capacity(kind)
        price = TYPES[kind]["instance_type"]["price_cents_per_hour"] / 100
        return self.add(
            str(body.get("name") or ""),
            kind,
            False,
            family,
            key["public_key"],
            price,
            region=region,
            key_name=key["name"],
            rulesets=rulesets,
            user_data=body.get("user_data", ""),
        )

    def _terminate(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        ids = [str(i) for i in body.get("instance_ids") or []]
        if not ids:
            raise _invalid("instance_ids must not be empty.")
        machines = [self.machines.get(i) for i in ids]
        if any(m is None or m.state == "deleted" for m in machines):
            raise _missing("instance")
        shown = []
        for machine in machines:
            assert machine is not None
            self.delete(machine.id)
            shown.append({**self._instance(machine), "status": "terminating"})
        return shown

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        """The instance with every field Lambda's OpenAPI requires of one."""
        up = machine.state == "running"
        region = machine.region or "us-east-1"
        kind = TYPES.get(machine.kind, {}).get("instance_type") or {  # a planted instance's
            "name": machine.kind,
            "description": machine.kind,
            "gpu_description": "",
            "price_cents_per_hour": round(machine.price * 100),
            "specs": {"vcpus": 1, "memory_gib": 1, "storage_gib": 1, "gpus": 0},
        }
        shown = {
            "id": machine.id,
            "name": machine.name,
            "status": STATUS.get(machine.state, "booting"),
            "ssh_key_names": [machine.extra.get("key_name", "")],
            "file_system_names": [],
            "region": {"name": region, "description": REGIONS.get(region, region)},
            "instance_type": kind,
            "actions": {action: {"available": up} for action in ACTIONS},
            "firewall_rulesets": [{"id": r} for r in machine.extra.get("rulesets", [])],
        }
        if up:
            shown.update(ip=machine.address, private_ip=machine.address, hostname=machine.address)
        return shown


def _check_rule(rule: dict[str, Any]) -> None:
    """A FirewallRule as Lambda documents it, else the invalid-parameters answer."""
    protocol = rule.get("protocol")
    if protocol not in ("tcp", "udp", "icmp", "all"):
        raise _invalid(f"Invalid protocol {protocol!r}.")
    ports = rule.get("port_range")
    if protocol in ("tcp", "udp") and not (
        isinstance(ports, list) and len(ports) == 2 and 1 <= ports[0] <= ports[1] <= 65535
    ):
        raise _invalid(f"Invalid port_range {ports!r}.")
    try:
        ipaddress.ip_network(str(rule.get("source_network")))
    except ValueError:
        raise _invalid(f"Invalid source_network {rule.get('source_network')!r}.") from None
