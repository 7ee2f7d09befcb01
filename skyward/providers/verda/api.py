"""Verda's REST API (``api.verda.com/v1``, formerly ``api.datacrunch.io/v1``) as
``MachineAPI``: an OAuth2 client credentials token (``POST /oauth2/token``, renewed
before it expires), instance types and prices in dollars (``GET /instance-types``),
where each is available (``GET /instance-availability``), SSH keys (``POST/GET/DELETE
/sshkeys``) and instances (``POST /instances``, ``GET /instances``, ``GET
/instances/{id}``, ``PUT /instances`` with ``action: delete``, which answers a result
per instance). Fields and statuses as Verda's official SDKs (verda-cloud/sdk-python,
verdacloud-sdk-go) have them. Credentials: ``VERDA_CLIENT_ID`` and
``VERDA_CLIENT_SECRET`` (or the older ``DATACRUNCH_CLIENT_ID``/``DATACRUNCH_CLIENT_SECRET``)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping

from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Key, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CloudAPIError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, base_url, capacity_errors

URL = "https://api.verda.com/v1"
"""Where Verda's SDKs send their calls (the DataCrunch host before the rename)."""
CLIENT_ID = credentials.Source(("VERDA_CLIENT_ID", "DATACRUNCH_CLIENT_ID"))
CLIENT_SECRET = credentials.Source(("VERDA_CLIENT_SECRET", "DATACRUNCH_CLIENT_SECRET"))
NO_CAPACITY = ("insufficient", "not enough", "unavailable", "not available", "sold out")
ENDED = ("deleting", "discontinued", "no_capacity", "notfound")
"""Statuses of an instance that is gone or never came (Verda found no capacity for the order)."""
STOPPED = ("offline", "error", "starting_hibernation", "hibernating")
_COUNT = re.compile(r"^\s*(\d+)\s*x\s*", re.IGNORECASE)


class VerdaAPI:
    """Calls Verda with the client credentials from the environment."""

    def __init__(self) -> None:
        client_id, secret = credentials.require("Verda", [CLIENT_ID, CLIENT_SECRET])
        hint = f"{CLIENT_ID.describe()} and {CLIENT_SECRET.describe()}"
        url = base_url("verda", URL)
        self._token: tuple[str, float] | None = None
        self._lock = threading.Lock()
        self._login = ApiClient("Verda", url, lambda: {}, hint)
        self._credentials = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
        self._http = ApiClient("Verda", url, self._auth, hint)

    def _auth(self) -> dict[str, str]:
        with self._lock:
            if self._token is None or time.monotonic() > self._token[1]:
                answer = fields.as_object(
                    self._login.call("POST", "/oauth2/token", "getting an access token", json=self._credentials)
                )
                expires = time.monotonic() + fields.number(answer, "expires_in", 3600) - 60
                self._token = (fields.text(answer, "access_token"), expires)
            return {"Authorization": f"Bearer {self._token[0]}"}

    def machine_types(self, region: str | None) -> list[MachineType]:
        listed_types = self._http.call("GET", "/instance-types", "listing instance types", params={"currency": "usd"})
        types = fields.as_objects(listed_types)
        where: dict[str, list[str]] = {}
        for spot in (False, True):
            params = {"is_spot": str(spot).lower()} | ({"location_code": region} if region else {})
            listed = self._http.call("GET", "/instance-availability", "reading availability", params=params)
            for place in fields.as_objects(listed):
                code = fields.text(place, "location_code")
                for name in fields.items(place, "availabilities"):
                    if code not in where.setdefault(fields.to_text(name, "availabilities"), []):
                        where[fields.to_text(name, "availabilities")].append(code)
        kinds = []
        for item in types:
            name = fields.text(item, "instance_type")
            gpu = fields.obj(item, "gpu")
            count = fields.integer(gpu, "number_of_gpus", 0)
            accelerator = _COUNT.sub("", fields.text(gpu, "description", "")).strip() or None if count else None
            for location in where.get(name, []):
                kinds.append(MachineType(
                    name=name, vcpus=fields.number(fields.obj(item, "cpu"), "number_of_cores", 0),
                    memory_gb=fields.number(fields.obj(item, "memory"), "size_in_gigabytes", 0),
                    price=_price(item, "price_per_hour"), spot_price=_price(item, "spot_price"),
                    region=location, accelerator=accelerator, accelerator_count=count,
                    accelerator_memory_gb=_per_gpu(item, count),
                    architecture=_architecture(item),
                ))
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        answer = self._http.call("POST", "/sshkeys", f"adding SSH key {name}", json={"name": name, "key": public_key})
        return _made_id(answer)

    def remove_key(self, key_id: str) -> None:
        self._http.remove(f"/sshkeys/{key_id}", f"deleting SSH key {key_id}")

    def keys(self) -> list[Key]:
        listed = self._http.call("GET", "/sshkeys", "listing SSH keys")
        return [Key(fields.text(k, "id"), fields.text(k, "name", "")) for k in fields.as_objects(listed)]

    def create(self, order: Order) -> str:
        body: dict[str, object] = {
            "instance_type": order.machine_type.name, "image": order.image, "hostname": order.name,
            "description": order.name, "location_code": order.machine_type.region, "is_spot": order.spot,
            "ssh_key_ids": [order.key_id] if order.key_id else [],
        }
        if order.disk_gb:
            body["os_volume"] = {"name": order.name, "size": order.disk_gb}
        with capacity_errors(NO_CAPACITY, f"Verda has no {order.machine_type.name} in {order.machine_type.region}"):
            answer = self._http.call("POST", "/instances", f"deploying {order.name}", json=body)
        return _made_id(answer)

    def get(self, machine_id: str) -> Machine | None:
        item = fields.as_object(self._http.read(f"/instances/{machine_id}", f"reading instance {machine_id}"))
        return _machine(item) if item else None

    def machines(self) -> list[Machine]:
        return [_machine(item) for item in fields.as_objects(self._http.call("GET", "/instances", "listing instances"))]

    def delete(self, machine_id: str) -> None:
        """``action: delete``; Verda answers each instance's result (207 when one failed):
        a failure other than not found (gone already) is raised."""
        what = f"deleting instance {machine_id}"
        try:
            answer = self._http.call("PUT", "/instances", what, json={"action": "delete", "id": [machine_id]})
        except CloudAPIError as exc:
            if exc.status != 404:
                raise
            return
        for result in answer if isinstance(answer, list) else []:
            if not isinstance(result, Mapping) or str(result.get("instanceId")) != machine_id:
                continue
            status = result.get("statusCode")
            if result.get("error") and status != 404:
                raise CloudAPIError(
                    f"the Verda API did not delete instance {machine_id}: {result['error']}",
                    status if isinstance(status, int) else 207, dict(result),
                )


def _made_id(answer: object) -> str:
    """The id a create answers: the id itself (as text), or an object holding it."""
    found = fields.text(answer, "id") if isinstance(answer, Mapping) else str(answer)
    return found.strip('"')


def _price(item: JsonObject, key: str) -> float | None:
    value = item.get(key)
    return fields.to_number(value, key) if value not in (None, "", 0, "0") else None


def _per_gpu(item: JsonObject, count: int) -> float | None:
    total = fields.number(fields.obj(item, "gpu_memory"), "size_in_gigabytes", 0)
    return total / count if total and count else None


def _architecture(item: JsonObject) -> str:
    return "arm64" if "arm" in fields.text(fields.obj(item, "cpu"), "description", "").lower() else "x86_64"


def _machine(item: JsonObject) -> Machine:
    status = fields.text(item, "status", "")
    host = fields.text(item, "ip", "") or None
    state: MachineState = "ended" if status in ENDED else "stopped" if status in STOPPED else "running" if status == "running" and host else "starting"
    created = epoch(item.get("created_at"))
    return Machine(
        fields.text(item, "id"), fields.text(item, "hostname", ""), state, host, 22, None,
        _price(item, "price_per_hour"),
        fields.flag(item, "is_spot"), fields.text(item, "instance_type", ""), created,
    )
