"""Vast.ai's REST API (``console.vast.ai/api/v0``) as ``MachineAPI``: offers from
``POST /bundles/`` (the search as the body; each an "ask" on one host machine), instances
created by accepting an ask (``PUT /asks/{id}/``), the pool's key attached per instance
(``POST /instances/{id}/ssh/``), ``GET /instances/{id}/``, ``DELETE /instances/{id}/``, and
the list from ``GET /api/v1/instances/``, page by page (at most 25 a page; the v0 list is
deprecated). The key is ``VAST_API_KEY`` (or ``~/.vast_api_key``, as the
``vastai`` tool keeps it), sent as a Bearer token.

Offers of the same GPU, count and place are one machine type whose ``ref`` lists their
asks, cheapest first: a pool's nodes take the next ask still free (an ask someone else
took answers ``no_such_ask``), so two nodes never compete for one host."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping

from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudAPIError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, base_url, bearer_client, message
from skyward.providers.cloud.keys import KeysInOrders

URL = "https://console.vast.ai/api/v0"
KEY = credentials.Source(("VAST_API_KEY",), "~/.vast_api_key")
QUERY = {"rentable": {"eq": True}, "rented": {"eq": False}, "verified": {"eq": True}, "order": [["dph_total", "asc"]]}
GONE = ("no_such_ask", "not available", "unavailable", "already rented")
PAGE = 25
"""The most instances ``GET /api/v1/instances/`` gives a page."""
BY_ID = json.dumps([{"col": "id", "dir": "asc"}])
ENDED = ("deleted", "destroyed")
STOPPED = ("exited", "offline")


class VastAPI(KeysInOrders):
    """Calls Vast.ai with the key from the environment (CredentialsError without one)."""

    def __init__(self) -> None:
        (key,) = credentials.require("Vast.ai", [KEY])
        self._http = bearer_client("Vast.ai", "vastai", URL, key, KEY.describe())
        v1 = base_url("vastai", URL).rstrip("/").removesuffix("/v0") + "/v1"
        self._v1 = ApiClient("Vast.ai", v1, lambda: {"Authorization": f"Bearer {key}"}, KEY.describe())
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def machine_types(self, region: str | None) -> list[MachineType]:
        answer = self._http.call("POST", "/bundles/", "searching offers", json=QUERY)
        groups: dict[tuple[str, int, str], list[JsonObject]] = {}
        for ask in fields.objects(fields.as_object(answer), "offers"):
            place = fields.text(ask, "geolocation", "")
            if region is not None and region.lower() not in place.lower():
                continue
            groups.setdefault((fields.text(ask, "gpu_name"), fields.integer(ask, "num_gpus"), place), []).append(ask)
        kinds = []
        for (gpu, count, place), asks in groups.items():
            asks.sort(key=lambda a: fields.number(a, "dph_total"))
            bids = [bid for bid in (fields.number(a, "min_bid", 0) for a in asks) if bid]
            kinds.append(MachineType(
                name=f"{count}x {gpu} ({place or 'anywhere'})", ref=",".join(fields.text(a, "id") for a in asks),
                vcpus=min(fields.number(a, "cpu_cores_effective", 0) for a in asks),
                memory_gb=min(fields.number(a, "cpu_ram", 0) for a in asks) / 1024,
                price=fields.number(asks[0], "dph_total"), spot_price=min(bids) if bids else None, region=place or None,
                accelerator=gpu.replace("_", " "), accelerator_count=count,
                accelerator_memory_gb=min(fields.number(a, "gpu_ram", 0) for a in asks) / 1024 or None,
                architecture="arm64" if asks[0].get("cpu_arch") in ("arm64", "aarch64") else "x86_64",
                disk_gb=min(fields.number(a, "disk_space", 0) for a in asks) or None,
            ))
        return kinds

    def create(self, order: Order) -> str:
        body: dict[str, object] = {
            "image": order.image, "label": order.name, "disk": order.disk_gb or 50,
            "runtype": "ssh_direct",
        }
        if order.spot and order.machine_type.spot_price is not None:
            body["price"] = order.machine_type.spot_price
        for ask in order.machine_type.ref.split(","):
            with self._lock:
                if ask in self._taken:
                    continue
                self._taken.add(ask)
            try:
                answer = self._http.call("PUT", f"/asks/{ask}/", f"renting offer {ask} for {order.name}", json=body)
            except CloudAPIError as exc:
                if any(text in message(exc.body).lower() for text in GONE):
                    continue
                raise
            made = fields.as_object(answer)
            if not made.get("success", True) or "new_contract" not in made:
                continue
            instance = fields.text(made, "new_contract")
            self._http.call(
                "POST", f"/instances/{instance}/ssh/", f"attaching the pool's key to {instance}",
                json={"ssh_key": order.public_key},
            )
            return instance
        raise CapacityError(f"Vast.ai has no free offer of {order.machine_type.name} left")

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/instances/{machine_id}/", f"reading instance {machine_id}")
        instance = fields.as_object(answer).get("instances")
        return _machine(instance) if isinstance(instance, Mapping) and instance else None

    def machines(self) -> list[Machine]:
        """Every instance: the pages of the v1 list, each after the last's ``next_token``."""
        found: list[Machine] = []
        params = {"limit": str(PAGE), "order_by": BY_ID}
        seen: set[str] = set()
        while True:
            answer = fields.as_object(self._v1.call("GET", "/instances/", "listing instances", params=params))
            found += [_machine(item) for item in fields.objects(answer, "instances")]
            token = answer.get("next_token")
            if not token or str(token) in seen:
                return found
            seen.add(str(token))
            params = {**params, "after_token": str(token)}

    def delete(self, machine_id: str) -> None:
        self._http.remove(f"/instances/{machine_id}/", f"destroying instance {machine_id}")


def _machine(item: JsonObject) -> Machine:
    status = fields.text(item, "actual_status", "")
    host, port = _ssh_address(item)
    state: MachineState = "ended" if status in ENDED else "stopped" if status in STOPPED else "running" if status == "running" and host and port else "starting"
    return Machine(
        fields.text(item, "id"), fields.text(item, "label", ""), state, host, port or 22, None,
        fields.number_or_none(item, "dph_total"), fields.flag(item, "is_bid"),
        f"{item.get('num_gpus', '')}x {item.get('gpu_name', '')}",
        fields.number(item, "start_date", 0) or None,
    )


def _ssh_address(item: JsonObject) -> tuple[str | None, int | None]:
    """Where SSH reaches the container, as Vast.ai's CLI pairs them: the host's public
    address and the port mapped to the container's 22 (direct), else Vast.ai's SSH proxy
    (``ssh_host``, ``ssh_port``); a public address never goes with the proxy's port."""
    mapped = fields.objects(fields.obj(item, "ports"), "22/tcp")
    if mapped:
        return fields.text(item, "public_ipaddr", "") or None, fields.integer(mapped[0], "HostPort")
    return fields.text(item, "ssh_host", "") or None, fields.integer(item, "ssh_port", 0) or None
