"""Verda's REST API (``api.datacrunch.io/v1``) as ``MachineAPI``: an OAuth2 client
credentials token (``POST /oauth2/token``, renewed before it expires), instance types
and prices (``GET /instance-types``), where each is available (``GET
/instance-availability``), SSH keys (``POST/GET/DELETE /sshkeys``) and instances
(``POST /instances``, ``GET /instances``, ``GET /instances/{id}``, ``PUT /instances``
with ``action: delete``). Credentials: ``VERDA_CLIENT_ID`` and ``VERDA_CLIENT_SECRET``
(or the older ``DATACRUNCH_CLIENT_ID``/``DATACRUNCH_CLIENT_SECRET``)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from skyward.providers.cloud import credentials
from skyward.providers.cloud.api import Key, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CapacityError, CloudAPIError
from skyward.providers.cloud.http import ApiClient, base_url, message

URL = "https://api.datacrunch.io/v1"
CLIENT_ID = credentials.Source(("VERDA_CLIENT_ID", "DATACRUNCH_CLIENT_ID"))
CLIENT_SECRET = credentials.Source(("VERDA_CLIENT_SECRET", "DATACRUNCH_CLIENT_SECRET"))
NO_CAPACITY = ("insufficient", "not enough", "unavailable", "not available", "sold out")
ENDED = ("deleting", "discontinued")
STOPPED = ("offline", "error")
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
                answer = self._login.call("POST", "/oauth2/token", "getting an access token", json=self._credentials)
                self._token = (str(answer["access_token"]), time.monotonic() + float(answer.get("expires_in", 3600)) - 60)
            return {"Authorization": f"Bearer {self._token[0]}"}

    def machine_types(self, region: str | None) -> list[MachineType]:
        types = self._http.call("GET", "/instance-types", "listing instance types") or []
        where: dict[str, list[str]] = {}
        for spot in (False, True):
            params = {"is_spot": str(spot).lower()} | ({"location_code": region} if region else {})
            for place in self._http.call("GET", "/instance-availability", "reading availability", params=params) or []:
                for name in place.get("availabilities", []):
                    if place["location_code"] not in where.setdefault(name, []):
                        where[name].append(place["location_code"])
        kinds = []
        for item in types:
            name = str(item["instance_type"])
            gpu = item.get("gpu") or {}
            count = int(gpu.get("number_of_gpus") or 0)
            accelerator = _COUNT.sub("", str(gpu.get("description") or "")).strip() or None if count else None
            for location in where.get(name, []):
                kinds.append(MachineType(
                    name=name, vcpus=float((item.get("cpu") or {}).get("number_of_cores") or 0),
                    memory_gb=float((item.get("memory") or {}).get("size_in_gigabytes") or 0),
                    price=_price(item.get("price_per_hour")), spot_price=_price(item.get("spot_price")),
                    region=location, accelerator=accelerator, accelerator_count=count,
                    accelerator_memory_gb=_per_gpu(item.get("gpu_memory"), count),
                    architecture="arm64" if "arm" in str(item.get("cpu", {}).get("description", "")).lower() else "x86_64",
                ))
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        answer = self._http.call("POST", "/sshkeys", f"adding SSH key {name}", json={"name": name, "key": public_key})
        return str(answer if not isinstance(answer, dict) else answer["id"]).strip('"')

    def remove_key(self, key_id: str) -> None:
        try:
            self._http.call("DELETE", f"/sshkeys/{key_id}", f"deleting SSH key {key_id}")
        except CloudAPIError as exc:
            if exc.status != 404:
                raise

    def keys(self) -> list[Key]:
        return [Key(str(k["id"]), str(k.get("name") or "")) for k in self._http.call("GET", "/sshkeys", "listing SSH keys") or []]

    def create(self, order: Order) -> str:
        body: dict[str, Any] = {
            "instance_type": order.machine_type.name, "image": order.image, "hostname": order.name,
            "description": order.name, "location_code": order.machine_type.region, "is_spot": order.spot,
            "ssh_key_ids": [order.key_id] if order.key_id else [],
        }
        if order.disk_gb:
            body["os_volume"] = {"name": order.name, "size": order.disk_gb}
        try:
            answer = self._http.call("POST", "/instances", f"deploying {order.name}", json=body)
        except CloudAPIError as exc:
            if any(text in message(exc.body).lower() for text in NO_CAPACITY):
                raise CapacityError(f"Verda has no {order.machine_type.name} in {order.machine_type.region}: {message(exc.body)}") from None
            raise
        return str(answer if not isinstance(answer, dict) else answer["id"]).strip('"')

    def get(self, machine_id: str) -> Machine | None:
        item = self._http.read(f"/instances/{machine_id}", f"reading instance {machine_id}")
        return _machine(item) if item else None

    def machines(self) -> list[Machine]:
        return [_machine(item) for item in self._http.call("GET", "/instances", "listing instances") or []]

    def delete(self, machine_id: str) -> None:
        try:
            self._http.call("PUT", "/instances", f"deleting instance {machine_id}", json={"action": "delete", "id": [machine_id]})
        except CloudAPIError as exc:
            if exc.status != 404:
                raise


def _price(value: Any) -> float | None:
    return float(value) if value not in (None, "", 0, "0") else None


def _per_gpu(memory: Any, count: int) -> float | None:
    total = float((memory or {}).get("size_in_gigabytes") or 0)
    return total / count if total and count else None


def _machine(item: dict[str, Any]) -> Machine:
    status = str(item.get("status") or "")
    host = item.get("ip") or None
    state: MachineState = "ended" if status in ENDED else "stopped" if status in STOPPED else "running" if status == "running" and host else "starting"
    created = epoch(item.get("created_at"))
    return Machine(
        str(item["id"]), str(item.get("hostname") or ""), state, host, 22, None, _price(item.get("price_per_hour")),
        bool(item.get("is_spot")), str(item.get("instance_type") or ""), created,
    )
