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
from collections.abc import Mapping

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import KeysInCollection, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, capacity_errors, message
from skyward.providers.cloud.keys import KeyCollection

URL = "https://vm.massedcompute.com/api/v1"
API_KEY = credentials.Source(("MASSED_COMPUTE_API_KEY",))
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


class MassedComputeAPI(KeysInCollection):
    """Calls Massed Compute with ``api_key`` (None: ``$MASSED_COMPUTE_API_KEY``)."""

    KEYS = KeyCollection("/ssh-keys", "id", "name", "publicKey", items="sshKeys", created="sshKey")
    """Added with ``publicKey``; listed with ``public_key`` (not read here)."""

    def __init__(self, api_key: str | None = None) -> None:
        key = credentials.given_or_found("Massed Compute", api_key, API_KEY)
        self._image: str | None = None
        self._http = bearer_client(
            "Massed Compute", "massed_compute", URL, key, f"MassedCompute(api_key=...) or {API_KEY.describe()}"
        )

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Each product in each region that has room for it now, at its hourly price; GPUs
        read from the product name and description (``gpu_2x_h100``, "2x H100 (80 GB)")."""
        answer = fields.as_object(self._http.call("GET", "/gpu-inventory", "listing the GPU inventory"))
        kinds = []
        for listed in fields.obj(answer, "gpu_inventory").values():
            item = fields.as_object(listed, "a GPU inventory item")
            kind = fields.obj(item, "instance_type")
            specs = fields.obj(kind, "specs")
            name = fields.text(kind, "name", "")
            accelerator, count, memory = _gpus(name, fields.text(kind, "description", ""))
            cents = fields.number(kind, "price_cents_per_hour", 0)
            if cents <= 0 or not name:
                continue
            for place in fields.items(item, "regions_with_capacity_available"):
                where = fields.text(fields.as_object(place, "a region with capacity"), "name", "")
                if not where or (region is not None and where != region):
                    continue
                kinds.append(
                    MachineType(
                        name=name,
                        vcpus=fields.number(specs, "vcpu_count", 0),
                        memory_gb=fields.number(specs, "memory_gib", 0),
                        price=cents / 100,
                        region=where,
                        accelerator=accelerator,
                        accelerator_count=count,
                        accelerator_memory_gb=memory,
                        disk_gb=fields.number(specs, "storage_gb", 0) or None,
                    )
                )
        return kinds

    def create(self, order: Order) -> str:
        """One instance of the order's product in its region, of image ``order.image`` (an
        id; empty: the first Ubuntu image), with the key named ``order.group`` and the boot
        script as its startup command. CapacityError when the region has no room."""
        body: dict[str, object] = {
            "imageId": int(order.image or self._default_image()),
            "productName": order.machine_type.name,
            "regionName": order.machine_type.region or "any",
            "instanceName": order.name,
            "command": order.user_data,
            "sshKeys": [order.group],
        }
        what = f"launching instance {order.name}"
        kind = order.machine_type
        shortage = f"Massed Compute has no {kind.name} in {kind.region}"
        with capacity_errors(NO_CAPACITY, shortage, statuses=(400, 409, 422, 503)):
            answer = self._http.call("POST", "/instance/launch", what, json=body)
        found = _uuid(answer)
        if found is None:
            raise CloudError(f"the Massed Compute API answered {what} without the instance's uuid: {message(answer)}")
        return found

    def get(self, machine_id: str) -> Machine | None:
        """The instance (its ``runningInstance``, as the OpenAPI document has it, or the
        first of ``runningInstances``, as the API has been seen to answer); None: gone."""
        answer = self._http.read(f"/instance/{machine_id}", f"reading instance {machine_id}")
        if not isinstance(answer, Mapping):
            return None
        listed = [i for i in fields.items(answer, "runningInstances") if isinstance(i, Mapping)]
        instance = fields.obj(answer, "runningInstance") or (listed[0] if listed else {})
        return _machine(instance) if instance else None

    def machines(self) -> list[Machine]:
        answer = fields.as_object(self._http.call("GET", "/instance", "listing instances"))
        return [_machine(i) for i in fields.items(answer, "runningInstances") if isinstance(i, Mapping)]

    def delete(self, machine_id: str) -> None:
        self._http.remove(
            "/instance/terminate", f"terminating instance {machine_id}", method="POST",
            json={"instanceUuids": [machine_id]},
        )

    def _default_image(self) -> str:
        """The id (``vm_image_id``) of the first image whose ``vm_image_name`` says Ubuntu;
        CloudError when there is none."""
        if self._image is None:
            answer = fields.as_object(self._http.call("GET", "/images", "listing images"))
            images = sorted(
                (i for i in fields.objects(answer, "images") if UBUNTU in fields.text(i, "vm_image_name", "").lower()),
                key=lambda i: fields.integer(i, "vm_image_id", 0),
            )
            if not images:
                raise CloudError(
                    "Massed Compute lists no Ubuntu image; give MassedCompute(image_id=...) from GET /images"
                )
            self._image = fields.text(images[0], "vm_image_id")
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


def _uuid(answer: object) -> str | None:
    """The new instance's uuid in a launch answer: its ``response`` (the OpenAPI
    document's 202), else ``uuid``, ``instance.uuid`` or the first of
    ``instances``/``instanceUuids``."""
    if not isinstance(answer, Mapping):
        return None
    made = answer.get("instance")
    instance: JsonObject = made if isinstance(made, Mapping) else {}
    listed = [*fields.items(answer, "instances"), *fields.items(answer, "instanceUuids")]
    first = listed[0] if listed else None
    said = answer.get("response")
    for value in (said if isinstance(said, str) else None, answer.get("uuid"), instance.get("uuid"),
                  first.get("uuid") if isinstance(first, Mapping) else first):
        if value:
            return str(value)
    return None


def _machine(instance: JsonObject) -> Machine:
    status = fields.text(instance, "status", "").lower()
    address = fields.text(instance, "ip", "") or None
    booted = bool(instance.get("os_booted"))
    state: MachineState = (
        "ended" if status in ENDED or instance.get("active") == 0
        else "stopped" if status in STOPPED
        else ("running" if status in RUNNING and booted and address else "starting")
    )
    sold = instance.get("product")
    product: JsonObject = sold if isinstance(sold, Mapping) else {}
    return Machine(
        fields.text(instance, "uuid"), fields.text(instance, "name", ""), state,
        ssh_host=address if state == "running" else None,
        hourly_price=_price(product), machine_type=fields.text(product, "name", ""),
        created=epoch(instance.get("created")),
    )


def _price(product: JsonObject) -> float | None:
    """The instance's hourly price in dollars: its product's ``price_hr`` (dollars, as
    text: "0.990000"), else a ``price_cents_per_hour`` (as the GPU inventory gives it)."""
    said = product.get("price_hr")
    if isinstance(said, (str, int, float)) and not isinstance(said, bool):
        try:
            return float(said)
        except ValueError:
            pass
    cents = fields.number_or_none(product, "price_cents_per_hour")
    return cents / 100 if cents is not None else None
