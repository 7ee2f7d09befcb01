"""Massed Compute's VM API v1 (``vm.massedcompute.com/api/v1``) as ``MachineAPI``: GPU
products with their hourly prices and the regions that have room for them (``GET
/gpu-inventory``), images (``GET /images``), SSH keys (``GET/POST /ssh-keys``,
``DELETE /ssh-keys/{id}``), instances (``POST /instance/launch``, ``GET /instance`` and
``/instance/{uuid}``, ``POST /instance/terminate``). Each instance is launched with the
pool's key, registered by name, and a startup command (skyward's boot script, after a
step that lets the key log in as root). The key travels as a Bearer token:
``api_key=`` or ``$MASSED_COMPUTE_API_KEY``."""

from __future__ import annotations

import re
from typing import Any

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials
from skyward.providers.cloud.api import Key, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CloudError
from skyward.providers.cloud.http import ApiClient, base_url, message
from skyward.providers.cloud.keys import KeyCollection

URL = "https://vm.massedcompute.com/api/v1"
API_KEY = credentials.Source(("MASSED_COMPUTE_API_KEY",))
KEYS = KeyCollection("/ssh-keys", "id", "name", "publicKey", items="sshKeys", created="sshKey")
PRODUCT = re.compile(r"^gpu_(?P<count>\d+)x_(?P<model>[a-z0-9_]+)$")
"""A product name such as ``gpu_1x_l40`` or ``gpu_8x_a100_80gb``."""
MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB", re.IGNORECASE)
SPELLINGS = {"a6000": "RTX A6000", "a5000": "RTX A5000", "a4000": "RTX A4000", "rtx6000ada": "RTX 6000 Ada"}
"""Product model names the catalog does not read as they are."""
NO_CAPACITY = ("capacity", "no inventory", "not available", "unavailable", "out of stock", "insufficient", "sold out")
UBUNTU = "ubuntu"
"""The default image: the first whose name says Ubuntu."""
RUNNING = ("rented", "running", "active")
STOPPED = ("stopped", "shutdown", "shut down", "paused")
ENDED = ("terminated", "terminating", "deleted", "returned")


class MassedComputeAPI:
    """Calls Massed Compute with ``api_key`` (None: ``$MASSED_COMPUTE_API_KEY``)."""

    def __init__(self, api_key: str | None = None) -> None:
        if api_key is None:
            (api_key,) = credentials.require("Massed Compute", [API_KEY])
        key = api_key
        self._image: str | None = None
        self._http = ApiClient(
            "Massed Compute",
            base_url("massed_compute", URL),
            lambda: {"Authorization": f"Bearer {key}"},
            f"MassedCompute(api_key=...) or {API_KEY.describe()}",
        )

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Each product in each region that has room for it now, at its hourly price; GPUs
        read from the product name and description (``gpu_2x_h100``, "2x H100 (80 GB)")."""
        answer = self._http.call("GET", "/gpu-inventory", "listing the GPU inventory") or {}
        kinds = []
        for item in (answer.get("gpu_inventory") or {}).values():
            kind = (item or {}).get("instance_type") or {}
            specs = kind.get("specs") or {}
            name = str(kind.get("name") or "")
            accelerator, count, memory = _gpus(name, str(kind.get("description") or ""))
            cents = float(kind.get("price_cents_per_hour") or 0)
            if cents <= 0 or not name:
                continue
            for place in item.get("regions_with_capacity_available") or []:
                where = str((place or {}).get("name") or "")
                if not where or (region is not None and where != region):
                    continue
                kinds.append(
                    MachineType(
                        name=name,
                        vcpus=float(specs.get("vcpu_count") or 0),
                        memory_gb=float(specs.get("memory_gib") or 0),
                        price=cents / 100,
                        region=where,
                        accelerator=accelerator,
                        accelerator_count=count,
                        accelerator_memory_gb=memory,
                        disk_gb=float(specs.get("storage_gb") or 0) or None,
                    )
                )
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        return KEYS.add(self._http, name, public_key)

    def remove_key(self, key_id: str) -> None:
        KEYS.remove(self._http, key_id)

    def keys(self) -> list[Key]:
        return KEYS.listed(self._http)

    def create(self, order: Order) -> str:
        """One instance of the order's product in its region, of image ``order.image`` (an
        id; empty: the first Ubuntu image), with the key named ``order.group`` and the boot
        script as its startup command. CapacityError when the region has no room."""
        body = {
            "imageId": int(order.image or self._default_image()),
            "productName": order.machine_type.name,
            "regionName": order.machine_type.region or "any",
            "instanceName": order.name,
            "command": order.user_data,
            "sshKeys": [order.group],
        }
        what = f"launching instance {order.name}"
        try:
            answer = self._http.call("POST", "/instance/launch", what, json=body)
        except CloudAPIError as exc:
            if exc.status in (400, 409, 422, 503) and any(t in message(exc.body).lower() for t in NO_CAPACITY):
                kind = order.machine_type
                raise CapacityError(f"Massed Compute has no {kind.name} in {kind.region}: {message(exc.body)}") from None
            raise
        found = _uuid(answer)
        if found is None:
            raise CloudError(f"the Massed Compute API answered {what} without the instance's uuid: {message(answer)}")
        return found

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/instance/{machine_id}", f"reading instance {machine_id}")
        instance = (answer or {}).get("runningInstance") if isinstance(answer, dict) else None
        return _machine(instance) if instance else None

    def machines(self) -> list[Machine]:
        answer = self._http.call("GET", "/instance", "listing instances") or {}
        return [_machine(i) for i in answer.get("runningInstances") or [] if isinstance(i, dict)]

    def delete(self, machine_id: str) -> None:
        try:
            self._http.call(
                "POST", "/instance/terminate", f"terminating instance {machine_id}",
                json={"instanceUuids": [machine_id]},
            )
        except CloudAPIError as exc:
            if exc.status != 404:
                raise

    def _default_image(self) -> str:
        """The id of the first image whose name says Ubuntu; CloudError when there is none."""
        if self._image is None:
            answer = self._http.call("GET", "/images", "listing images") or {}
            images = sorted(
                (i for i in answer.get("images") or [] if UBUNTU in str(i.get("name") or "").lower()),
                key=lambda i: int(i.get("id") or 0),
            )
            if not images:
                raise CloudError(
                    "Massed Compute lists no Ubuntu image; give MassedCompute(image_id=...) from GET /images"
                )
            self._image = str(images[0]["id"])
        return self._image


def _gpus(name: str, description: str) -> tuple[str | None, int, float | None]:
    """The product's GPU as the catalog reads it, how many, and one GPU's memory (from the
    description, else the name, else the catalog); (None, 0, None) for a CPU product."""
    found = PRODUCT.match(name)
    if found is None:
        return None, 0, None
    model = found["model"]
    sized = re.fullmatch(r"(?P<base>[a-z0-9]+?)_?(?P<gb>\d+)gb", model)
    base = sized["base"] if sized else model
    seen = identify(SPELLINGS.get(base, base.replace("_", " ").upper()))
    said = MEMORY.search(description)
    memory = float(said.group(1)) if said else float(sized["gb"]) if sized else (
        float(seen.model.variants[0].memory_gb) if seen else None
    )
    return (seen.model.name if seen is not None else base.upper()), int(found["count"]), memory


def _uuid(answer: Any) -> str | None:
    """The new instance's uuid in a launch answer (``uuid``, ``instance.uuid`` or the first
    of ``instances``/``instanceUuids``)."""
    if not isinstance(answer, dict):
        return None
    made = answer.get("instance")
    instance: dict[str, Any] = made if isinstance(made, dict) else {}
    listed = [*(answer.get("instances") or []), *(answer.get("instanceUuids") or [])]
    first = listed[0] if listed else None
    for value in (answer.get("uuid"), instance.get("uuid"), first.get("uuid") if isinstance(first, dict) else first):
        if value:
            return str(value)
    return None


def _machine(instance: dict[str, Any]) -> Machine:
    status = str(instance.get("status") or "").lower()
    address = str(instance.get("ip") or "") or None
    booted = bool(instance.get("os_booted"))
    state: MachineState = (
        "ended" if status in ENDED or instance.get("active") == 0
        else "stopped" if status in STOPPED
        else ("running" if status in RUNNING and booted and address else "starting")
    )
    product = instance.get("product") or {}
    cents = product.get("price_cents_per_hour") if isinstance(product, dict) else None
    return Machine(
        str(instance["uuid"]),
        str(instance.get("name") or ""),
        state,
        address if state == "running" else None,
        22,
        None,
        float(cents) / 100 if cents is not None else None,
        False,
        str(product.get("name") or "") if isinstance(product, dict) else "",
        epoch(instance.get("created")),
    )
