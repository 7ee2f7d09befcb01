"""Lambda's Cloud API (``cloud.lambda.ai/api/v1``) as ``MachineAPI`` and ``FirewallAPI``:
instance types with their prices and the regions that have room for them (``GET
/instance-types``), SSH keys (``GET/POST /ssh-keys``, ``DELETE /ssh-keys/{id}``),
instances (``POST /instance-operations/launch`` and ``/terminate``, ``GET /instances``,
``GET /instances/{id}``) and firewall rulesets (``POST/GET /firewall-rulesets``,
``DELETE /firewall-rulesets/{id}``). A ruleset belongs to one region: a pool gets one,
named for its group, in each region it launches in, made before the region's first
instance and attached to every instance there. The key travels as a Bearer token:
``api_key=``, ``LAMBDA_API_KEY``, or ``api_key`` in ``~/.lambda_cloud/lambda_keys``."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Firewall, KeysInCollection, Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, message
from skyward.providers.cloud.keys import KeyCollection

URL = "https://cloud.lambda.ai/api/v1"
API_KEY = credentials.Source(("LAMBDA_API_KEY",), "~/.lambda_cloud/lambda_keys", "api_key")
NO_CAPACITY = "instance-operations/launch/insufficient-capacity"
PRIVATE_NETWORK = "10.0.0.0/8"
"""Where Lambda's private instance addresses come from: the rule that admits the pool's peers."""
ENDED = ("terminating", "terminated", "preempted")
GPU = re.compile(r"^(?P<name>.+?)\s*\((?P<memory>\d+(?:\.\d+)?)\s*GB(?:\s+(?P<form>[^)]*))?\)\s*$")
"""A ``gpu_description`` such as ``A100 (40 GB SXM4)``: the model, one GPU's memory, the form."""
SPELLINGS = {"RTX 6000": "Quadro RTX 6000"}
"""Lambda GPU names the catalog does not read as they are."""


def firewall_rules() -> list[dict[str, object]]:
    """Inbound SSH from anywhere, inbound TCP and UDP from Lambda's private network."""
    ssh: dict[str, object] = {
        "protocol": "tcp",
        "port_range": [22, 22],
        "source_network": "0.0.0.0/0",
        "description": "SSH",
    }
    peers: list[dict[str, object]] = [
        {
            "protocol": protocol,
            "port_range": [1, 65535],
            "source_network": PRIVATE_NETWORK,
            "description": "the pool's own instances",
        }
        for protocol in ("tcp", "udp")
    ]
    return [ssh, *peers]


class LambdaAPI(KeysInCollection):
    """Calls Lambda with ``api_key`` (None: ``LAMBDA_API_KEY`` or Lambda's key file)."""

    KEYS = KeyCollection("/ssh-keys", "id", "name", "public_key", items="data", created="data")

    def __init__(self, api_key: str | None = None) -> None:
        key = credentials.given_or_found("Lambda", api_key, API_KEY)
        self._rulesets: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        self._http = bearer_client("Lambda", "lambda", URL, key, f"Lambda(api_key=...) or {API_KEY.describe()}")

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Each instance type in each region that has room for it now (types no region has
        room for are not offered), at its hourly price."""
        answer = fields.as_object(self._http.call("GET", "/instance-types", "listing instance types"))
        kinds = []
        for listed in fields.obj(answer, "data").values():
            item = fields.as_object(listed, "an instance type")
            kind = fields.obj(item, "instance_type")
            specs = fields.obj(kind, "specs")
            count = fields.integer(specs, "gpus", 0)
            accelerator, memory = _accelerator(fields.text(kind, "gpu_description", ""))
            for place in fields.objects(item, "regions_with_capacity_available"):
                name = fields.text(place, "name", "")
                if region is not None and name != region:
                    continue
                kinds.append(
                    MachineType(
                        name=fields.text(kind, "name"),
                        vcpus=fields.number(specs, "vcpus", 0),
                        memory_gb=fields.number(specs, "memory_gib", 0),
                        price=fields.number(kind, "price_cents_per_hour", 0) / 100 or None,
                        region=name,
                        accelerator=accelerator if count else None,
                        accelerator_count=count,
                        accelerator_memory_gb=memory if count else None,
                        disk_gb=fields.number(specs, "storage_gib", 0) or None,
                    )
                )
        return kinds

    def create(self, order: Order) -> str:
        """One instance of the order's type in its region, with the SSH key named
        ``order.group`` and the group's ruleset for that region (made first if the group
        has none there yet); the image family ``order.image`` (empty: Lambda Stack)."""
        region = str(order.machine_type.region or "")
        body: dict[str, object] = {
            "region_name": region,
            "instance_type_name": order.machine_type.name,
            "ssh_key_names": [order.group],
            "name": order.name,
            "user_data": order.user_data,
            "firewall_rulesets": [{"id": self._ruleset(order.group, region)}],
        }
        if order.image:
            body["image"] = {"family": order.image}
        try:
            answer = self._http.call(
                "POST", "/instance-operations/launch", f"launching instance {order.name}", json=body
            )
        except CloudAPIError as exc:
            if _code(exc.body) == NO_CAPACITY:
                raise CapacityError(
                    f"Lambda has no {order.machine_type.name} in {region}: {message(exc.body)}"
                ) from None
            raise
        ids = fields.items(fields.obj(fields.as_object(answer), "data"), "instance_ids")
        if len(ids) != 1:
            raise CloudError(
                f"Lambda answered launching instance {order.name} with {len(ids)} instances "
                "instead of one"
            )
        return str(ids[0])

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/instances/{machine_id}", f"reading instance {machine_id}")
        data = fields.obj(fields.as_object(answer), "data")
        return _machine(data) if data else None

    def machines(self) -> list[Machine]:
        answer = fields.as_object(self._http.call("GET", "/instances", "listing instances"))
        return [_machine(item) for item in fields.objects(answer, "data")]

    def delete(self, machine_id: str) -> None:
        self._http.remove(
            "/instance-operations/terminate",
            f"terminating instance {machine_id}",
            method="POST",
            json={"instance_ids": [machine_id]},
        )

    def add_firewall(self, group: str) -> str:
        """The group itself: its rulesets are made per region by ``create``, each before
        the first instance of the group in that region (a ruleset belongs to one region,
        and the region is known only once an offer is chosen)."""
        return group

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        """Every ruleset named ``group``, and the one with id ``firewall_id``."""
        for ruleset in self._rulesets_listed():
            if ruleset["name"] == group or ruleset["id"] == firewall_id:
                self._http.remove(f"/firewall-rulesets/{ruleset['id']}", f"deleting firewall ruleset {group}")
        with self._lock:
            for place in [k for k in self._rulesets if k[0] == group]:
                del self._rulesets[place]

    def firewalls(self) -> list[Firewall]:
        return [Firewall(r["id"], r["name"]) for r in self._rulesets_listed()]

    def _ruleset(self, group: str, region: str) -> str:
        """The id of ``group``'s ruleset in ``region`` (``firewall_rules()``), made once."""
        with self._lock:
            if (group, region) not in self._rulesets:
                answer = self._http.call(
                    "POST",
                    "/firewall-rulesets",
                    f"creating firewall ruleset {group} in {region}",
                    json={"name": group, "region": region, "rules": firewall_rules()},
                )
                self._rulesets[(group, region)] = fields.text(fields.obj(fields.as_object(answer), "data"), "id")
            return self._rulesets[(group, region)]

    def _rulesets_listed(self) -> list[dict[str, str]]:
        answer = fields.as_object(self._http.call("GET", "/firewall-rulesets", "listing firewall rulesets"))
        listed = fields.objects(answer, "data")
        return [{"id": fields.text(r, "id"), "name": fields.text(r, "name", "")} for r in listed]


def _code(body: object) -> str:
    """The ``error.code`` of a Lambda error answer ("" when it has none)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    return str(error.get("code") or "") if isinstance(error, Mapping) else ""


def _accelerator(description: str) -> tuple[str | None, float | None]:
    """A ``gpu_description`` as the catalog reads it, with one GPU's memory:
    ``H100 (80 GB SXM5)`` -> ``("H100-SXM5", 80.0)``; a name the catalog does not know is
    passed on as it is."""
    found = GPU.match(description.strip())
    if found is None:
        return (description.strip() or None), None
    name = SPELLINGS.get(found["name"], found["name"])
    form = found["form"]
    spelled = f"{name}-{form}" if form and identify(f"{name}-{form}") is not None else name
    return spelled, float(found["memory"])


def _machine(instance: JsonObject) -> Machine:
    status = fields.text(instance, "status", "")
    public = fields.text(instance, "ip", "") or None
    state: MachineState = (
        "ended"
        if status in ENDED
        else "stopped"
        if status == "unhealthy"
        else ("running" if status == "active" and public else "starting")
    )
    kind = fields.obj(instance, "instance_type")
    cents = fields.number_or_none(kind, "price_cents_per_hour")
    return Machine(
        fields.text(instance, "id"), fields.text(instance, "name", ""), state, ssh_host=public,
        private_ip=fields.text(instance, "private_ip", "") or None,
        hourly_price=cents / 100 if cents is not None else None,
        machine_type=fields.text(kind, "name", ""),
    )
