"""Novita's GPU instance API (``api.novita.ai/gpu-instance/openapi/v1``) as
``MachineAPI``: products and prices (``GET /products``; prices in units of 1/100,000 USD
per hour and GPU), instances (``POST /gpu/instance/create``, ``GET /gpu/instance``,
``GET /gpu/instances``, ``POST /gpu/instance/delete``). The key is ``NOVITA_API_KEY``,
sent as a Bearer token. An instance gets the pool's public key in ``PUBLIC_KEY`` and
exposes port 22 over TCP (``portMappings`` says where it is reached)."""

from __future__ import annotations

import itertools

from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CloudAPIError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, capacity_errors, message
from skyward.providers.cloud.keys import KeysInOrders

URL = "https://api.novita.ai/gpu-instance/openapi/v1"
KEY = credentials.Source(("NOVITA_API_KEY",))
PRICE_UNIT = 100_000
"""Novita's prices are integers of 1/100,000 USD per hour."""
GPU_COUNTS = (1, 2, 4, 8)
PAGE_SIZE = 100
"""Instances a page of ``GET /gpu/instances``."""
NO_CAPACITY = ("insufficient", "not enough", "no available", "sold out", "out of stock")
ENDED = ("toremove", "removing", "removed")
STOPPED = ("exited", "failed")
NOT_FOUND = ("not found", "not exist")


class NovitaAPI(KeysInOrders):
    """Calls Novita with the key from the environment."""

    def __init__(self) -> None:
        (key,) = credentials.require("Novita", [KEY])
        self._http = bearer_client("Novita", "novita", URL, key, KEY.describe())

    def machine_types(self, region: str | None) -> list[MachineType]:
        answer = fields.as_object(self._http.call("GET", "/products", "listing products"))
        kinds = []
        for product in fields.objects(answer, "data"):
            if not product.get("availableDeploy", True):
                continue
            places: list[object] = fields.items(product, "regions") or [None]
            name = fields.text(product, "name")
            for place in places:
                if region is not None and place != region:
                    continue
                for count in GPU_COUNTS:
                    if count > fields.integer(product, "maxGpuNum", 8):
                        continue
                    kinds.append(MachineType(
                        name=f"{count}x {name}", ref=fields.text(product, "id"),
                        vcpus=fields.number(product, "cpuPerGpu", 0) * count,
                        memory_gb=fields.number(product, "memoryPerGpu", 0) * count,
                        price=_dollars(product, "price", count), spot_price=_dollars(product, "spotPrice", count),
                        region=None if place is None else str(place), accelerator=_gpu(name), accelerator_count=count,
                        accelerator_memory_gb=_memory(name),
                        disk_gb=fields.number(product, "diskPerGpu", 0) * count or None,
                    ))
        return kinds

    def create(self, order: Order) -> str:
        body: dict[str, object] = {
            "name": order.name, "productId": order.machine_type.ref, "gpuNum": order.machine_type.accelerator_count,
            "rootfsSize": order.disk_gb or 50, "imageUrl": order.image, "kind": "gpu", "ports": "22/tcp",
            "envs": [{"key": "PUBLIC_KEY", "value": order.public_key}],
        }
        if order.spot:
            body["billingMode"] = "spot"
        if order.machine_type.region:
            body["clusterId"] = order.machine_type.region
        with capacity_errors(NO_CAPACITY, f"Novita has no {order.machine_type.name} right now"):
            answer = self._http.call("POST", "/gpu/instance/create", f"creating instance {order.name}", json=body)
        return fields.text(fields.as_object(answer), "id")

    def get(self, machine_id: str) -> Machine | None:
        try:
            item = self._http.call("GET", "/gpu/instance", f"reading instance {machine_id}", params={"instanceId": machine_id})
        except CloudAPIError as exc:
            if exc.status == 404 or any(text in message(exc.body).lower() for text in NOT_FOUND):
                return None
            raise
        found = fields.as_object(item)
        return _machine(found) if found else None

    def machines(self) -> list[Machine]:
        """Every instance, page by page (``PAGE_SIZE`` a page) until the pages hold the
        ``total`` the API gives, or one comes back short."""
        found: list[Machine] = []
        for number in itertools.count(1):
            answer = fields.as_object(self._http.call(
                "GET", "/gpu/instances", "listing instances", params={"pageSize": PAGE_SIZE, "pageNum": number}))
            page = fields.objects(answer, "instances")
            found += [_machine(item) for item in page]
            total = fields.integer(answer, "total", 0)
            if len(page) < PAGE_SIZE or (total and len(found) >= total):
                return found
        raise AssertionError("unreachable")

    def delete(self, machine_id: str) -> None:
        try:
            self._http.call("POST", "/gpu/instance/delete", f"deleting instance {machine_id}", json={"instanceId": machine_id})
        except CloudAPIError as exc:
            if exc.status != 404 and not any(text in message(exc.body).lower() for text in NOT_FOUND):
                raise


def _dollars(product: JsonObject, key: str, count: int) -> float | None:
    value = fields.number(product, key, 0)
    return round(value * count / PRICE_UNIT, 6) if value else None


def _gpu(name: str) -> str:
    """ "RTX 4090 24GB" -> "RTX 4090"."""
    return " ".join(part for part in name.split() if not part.upper().endswith("GB"))


def _memory(name: str) -> float | None:
    for part in name.split():
        if part.upper().endswith("GB") and part[:-2].replace(".", "").isdigit():
            return float(part[:-2])
    return None


def _machine(item: JsonObject) -> Machine:
    status = fields.text(item, "status", "").lower()
    ssh = [m for m in fields.objects(item, "portMappings") if fields.integer(m, "port", 0) == 22]
    endpoint = fields.text(ssh[0], "endpoint", "") if ssh else ""
    host, _, port = endpoint.rpartition(":")
    state: MachineState = "ended" if status in ENDED else "stopped" if status in STOPPED else "running" if status == "running" and host else "starting"
    price = fields.number(item, "gpuPrice", 0) or fields.number(item, "price", 0)
    created = fields.text(item, "createdAt", "")
    return Machine(
        fields.text(item, "id"), fields.text(item, "name", ""), state, host or None,
        int(port) if port.isdigit() else 22, None,
        price / PRICE_UNIT if price else None, fields.text(item, "billingMode", "") == "spot",
        fields.text(item, "productName", ""), float(created) if created.isdigit() else None,
    )
