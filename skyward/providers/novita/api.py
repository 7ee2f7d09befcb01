"""Novita's GPU instance API (``api.novita.ai/gpu-instance/openapi/v1``) as
``MachineAPI``: products and prices (``GET /products``; prices in units of 1/100,000 USD
per hour and GPU), instances (``POST /gpu/instance/create``, ``GET /gpu/instance``,
``GET /gpu/instances``, ``POST /gpu/instance/delete``). The key is ``NOVITA_API_KEY``,
sent as a Bearer token. An instance gets the pool's public key in ``PUBLIC_KEY`` and
exposes port 22 over TCP (``portMappings`` says where it is reached)."""

from __future__ import annotations

from typing import Any

from skyward.providers.cloud import credentials
from skyward.providers.cloud.api import Key, Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudAPIError
from skyward.providers.cloud.http import ApiClient, base_url, message

URL = "https://api.novita.ai/gpu-instance/openapi/v1"
KEY = credentials.Source(("NOVITA_API_KEY",))
PRICE_UNIT = 100_000
"""Novita's prices are integers of 1/100,000 USD per hour."""
GPU_COUNTS = (1, 2, 4, 8)
NO_CAPACITY = ("insufficient", "not enough", "no available", "sold out", "out of stock")
ENDED = ("toremove", "removing", "removed")
STOPPED = ("exited", "failed")
NOT_FOUND = ("not found", "not exist")


class NovitaAPI:
    """Calls Novita with the key from the environment."""

    def __init__(self) -> None:
        (key,) = credentials.require("Novita", [KEY])
        self._http = ApiClient("Novita", base_url("novita", URL), lambda: {"Authorization": f"Bearer {key}"}, KEY.describe())

    def machine_types(self, region: str | None) -> list[MachineType]:
        answer = self._http.call("GET", "/products", "listing products") or {}
        kinds = []
        for product in answer.get("data", []):
            if not product.get("availableDeploy", True):
                continue
            places = product.get("regions") or [None]
            for place in places:
                if region is not None and place != region:
                    continue
                for count in GPU_COUNTS:
                    if count > int(product.get("maxGpuNum") or 8):
                        continue
                    kinds.append(MachineType(
                        name=f"{count}x {product['name']}", ref=str(product["id"]),
                        vcpus=float(product.get("cpuPerGpu") or 0) * count,
                        memory_gb=float(product.get("memoryPerGpu") or 0) * count,
                        price=_dollars(product.get("price"), count), spot_price=_dollars(product.get("spotPrice"), count),
                        region=place, accelerator=_gpu(str(product["name"])), accelerator_count=count,
                        accelerator_memory_gb=_memory(str(product["name"])),
                        disk_gb=float(product.get("diskPerGpu") or 0) * count or None,
                    ))
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        return None  # each instance gets the key in its environment

    def remove_key(self, key_id: str) -> None:
        return None

    def keys(self) -> list[Key]:
        return []

    def create(self, order: Order) -> str:
        body: dict[str, Any] = {
            "name": order.name, "productId": order.machine_type.ref, "gpuNum": order.machine_type.accelerator_count,
            "rootfsSize": order.disk_gb or 50, "imageUrl": order.image, "kind": "gpu", "ports": "22/tcp",
            "envs": [{"key": "PUBLIC_KEY", "value": order.public_key}],
        }
        if order.spot:
            body["billingMode"] = "spot"
        if order.machine_type.region:
            body["clusterId"] = order.machine_type.region
        try:
            answer = self._http.call("POST", "/gpu/instance/create", f"creating instance {order.name}", json=body)
        except CloudAPIError as exc:
            if any(text in message(exc.body).lower() for text in NO_CAPACITY):
                raise CapacityError(f"Novita has no {order.machine_type.name} right now: {message(exc.body)}") from None
            raise
        return str(answer["id"])

    def get(self, machine_id: str) -> Machine | None:
        try:
            item = self._http.call("GET", "/gpu/instance", f"reading instance {machine_id}", params={"instanceId": machine_id})
        except CloudAPIError as exc:
            if exc.status == 404 or any(text in message(exc.body).lower() for text in NOT_FOUND):
                return None
            raise
        return _machine(item) if item else None

    def machines(self) -> list[Machine]:
        answer = self._http.call("GET", "/gpu/instances", "listing instances", params={"pageSize": 100, "pageNum": 1})
        return [_machine(item) for item in (answer or {}).get("instances", []) or []]

    def delete(self, machine_id: str) -> None:
        try:
            self._http.call("POST", "/gpu/instance/delete", f"deleting instance {machine_id}", json={"instanceId": machine_id})
        except CloudAPIError as exc:
            if exc.status != 404 and not any(text in message(exc.body).lower() for text in NOT_FOUND):
                raise


def _dollars(value: Any, count: int) -> float | None:
    return round(float(value) * count / PRICE_UNIT, 6) if value else None


def _gpu(name: str) -> str:
    """ "RTX 4090 24GB" -> "RTX 4090"."""
    return " ".join(part for part in name.split() if not part.upper().endswith("GB"))


def _memory(name: str) -> float | None:
    for part in name.split():
        if part.upper().endswith("GB") and part[:-2].replace(".", "").isdigit():
            return float(part[:-2])
    return None


def _machine(item: dict[str, Any]) -> Machine:
    status = str(item.get("status") or "").lower()
    endpoint = next((m.get("endpoint") for m in item.get("portMappings") or [] if int(m.get("port", 0)) == 22), None)
    host, _, port = str(endpoint or "").rpartition(":")
    state: MachineState = "ended" if status in ENDED else "stopped" if status in STOPPED else "running" if status == "running" and host else "starting"
    price = item.get("gpuPrice") or item.get("price")
    return Machine(
        str(item["id"]), str(item.get("name") or ""), state, host or None, int(port) if port.isdigit() else 22, None,
        float(price) / PRICE_UNIT if price else None, str(item.get("billingMode") or "") == "spot",
        str(item.get("productName") or ""), float(item["createdAt"]) if str(item.get("createdAt") or "").isdigit() else None,
    )
