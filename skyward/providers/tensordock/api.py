"""TensorDock's v2 API (``dashboard.tensordock.com/api/v2``) as ``MachineAPI``: the
locations with their GPUs and resource prices (``GET /locations``), virtual machines
created by location (``POST /instances`` with the public key and a port forward for SSH),
``GET /instances``, ``GET /instances/{id}`` and ``DELETE /instances/{id}``. A VM is
reached at its host's public address on the external port forwarded to its port 22. The
token is sent as a Bearer token: ``api_token=`` or ``TENSORDOCK_API_TOKEN``. TensorDock
registers no keys (the key travels in each order) and has no firewall resource."""

from __future__ import annotations

from collections.abc import Mapping

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import bearer_client, capacity_errors
from skyward.providers.cloud.keys import KeysInOrders

URL = "https://dashboard.tensordock.com/api/v2"
TOKEN = credentials.Source(("TENSORDOCK_API_TOKEN",))
MIN_STORAGE_GB = 100
"""TensorDock's smallest disk; every VM gets at least this much."""
GPU_COUNTS = (1, 2, 4, 8)
VCPUS_PER_GPU = (4, 8, 16)
"""The sizes offered per GPU count (vCPUs per GPU); memory is 4 GB per vCPU."""
RAM_STEP_GB = 8
SSH_PORT = 22
BOOT_SCRIPT = "/var/lib/skyward-boot.sh"
NO_CAPACITY = (
    "no available",
    "not available",
    "insufficient",
    "not enough",
    "capacity",
    "out of stock",
)
STOPPED = ("stopping", "stopped", "stoppeddisassociated", "error")
ENDED = ("deleting", "deleted", "terminated")
SPELLINGS = {"a6000": "RTX A6000", "rtx6000ada": "RTX 6000 Ada"}
"""TensorDock GPU model ids the catalog does not read once ``geforce``/``rtx`` are split off."""


class TensorDockAPI(KeysInOrders):
    """Calls TensorDock with ``api_token`` (None: ``TENSORDOCK_API_TOKEN``)."""

    def __init__(self, api_token: str | None = None) -> None:
        token = credentials.given_or_found("TensorDock", api_token, TOKEN)
        self._http = bearer_client(
            "TensorDock", "tensordock", URL, token, f"TensorDock(api_token=...) or {TOKEN.describe()}"
        )

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Every GPU of every location whose place ("City, State, Country") contains
        ``region`` (or whose id is ``region``; None: every location), at 1, 2, 4 and 8 GPUs
        up to what the location can deploy, in the sizes of ``VCPUS_PER_GPU`` that fit,
        priced as TensorDock bills: the GPUs, the vCPUs, the memory and a
        ``MIN_STORAGE_GB`` disk. GPUs whose location forwards no ports are left out."""
        answer = fields.as_object(self._http.call("GET", "/locations", "listing locations"))
        kinds: list[MachineType] = []
        for location in fields.objects(fields.obj(answer, "data"), "locations"):
            place = _place(location)
            if (
                region is not None
                and region.lower() not in place.lower()
                and region != location.get("id")
            ):
                continue
            for gpu in fields.objects(location, "gpus"):
                kinds.extend(_kinds(fields.text(location, "id"), place, gpu))
        return kinds

    def create(self, order: Order) -> str:
        """One VM of the order's GPU, size and location, its public key in ``ssh_key``,
        port 22 forwarded (the only port), the boot script written and run by cloud-init.
        CapacityError when TensorDock has no host for it there."""
        kind = order.machine_type
        location, _, gpu = kind.ref.partition(" ")
        attributes: dict[str, object] = {
            "name": order.name,
            "type": "virtualmachine",
            "image": order.image,
            "resources": {
                "vcpu_count": int(kind.vcpus),
                "ram_gb": int(kind.memory_gb),
                "storage_gb": max(MIN_STORAGE_GB, order.disk_gb or MIN_STORAGE_GB),
                "gpus": {gpu: {"count": kind.accelerator_count}},
            },
            "location_id": location,
            "ssh_key": order.public_key,
            "port_forwards": [{"internal_port": SSH_PORT, "external_port": 0}],
            "cloud_init": {
                "write_files": [{"path": BOOT_SCRIPT, "content": order.user_data}],
                "runcmd": [f"bash {BOOT_SCRIPT}"],
            },
        }
        body = {"data": {"type": "virtualmachine", "attributes": attributes}}
        with capacity_errors(NO_CAPACITY, f"TensorDock has no {kind.name} in {kind.region}"):
            answer = self._http.call("POST", "/instances", f"creating VM {order.name}", json=body)
        made = fields.as_object(answer)
        created = _flat(fields.obj(made, "data") or made)
        if not created.get("id"):
            raise CloudError(f"TensorDock answered creating VM {order.name} without an instance id")
        return fields.text(created, "id")

    def get(self, machine_id: str) -> Machine | None:
        """The VM (flat or in a ``data`` envelope), None on 404; CloudError for an answer
        that holds no instance (never read as gone)."""
        answer = self._http.read(f"/instances/{machine_id}", f"reading VM {machine_id}")
        if answer is None:
            return None
        item = answer.get("data", answer) if isinstance(answer, Mapping) else None
        if not isinstance(item, Mapping) or not item:
            raise CloudError(f"TensorDock answered reading VM {machine_id} with {answer!r:.200}")
        return _machine({"id": machine_id, **item})

    def machines(self) -> list[Machine]:
        """Every VM, from ``data.instances`` (the Instance Management page's shape) or
        ``data.attributes.instances`` (the Getting Started page's); a listed VM carries
        only its name and status, so it reads as starting until ``get`` shows its address."""
        answer = fields.as_object(self._http.call("GET", "/instances", "listing VMs"))
        data = fields.obj(answer, "data")
        listed = fields.objects(data, "instances") or fields.objects(fields.obj(data, "attributes"), "instances")
        return [_machine(item) for item in listed]

    def delete(self, machine_id: str) -> None:
        self._http.remove(f"/instances/{machine_id}", f"deleting VM {machine_id}")


def accelerator(v0_name: str) -> tuple[str, float | None]:
    """A TensorDock GPU id as the catalog reads it, and its memory in GB:
    ``geforcertx4090-pcie-24gb`` -> ("RTX 4090 PCIE", 24.0), ``h100-sxm5-80gb`` ->
    ("H100 SXM5", 80.0); ids the catalog does not know are passed on as they are."""
    parts = v0_name.lower().split("-")
    memory = None
    if len(parts) > 1 and parts[-1].endswith("gb") and parts[-1][:-2].isdigit():
        memory = float(parts[-1][:-2])
        parts = parts[:-1]
    model = parts[0].removeprefix("geforce")
    if model in SPELLINGS:
        model = SPELLINGS[model]
    elif model.startswith("rtx"):
        model = "RTX " + model.removeprefix("rtx").upper()
    else:
        model = model.upper()
    name = " ".join([model, *(p.upper() for p in parts[1:])])
    return (name if identify(name) is not None else v0_name), memory


def _place(location: JsonObject) -> str:
    parts = (location.get("city"), location.get("stateprovince"), location.get("country"))
    return ", ".join(str(p) for p in parts if p) or fields.text(location, "id", "")


def _kinds(location: str, place: str, gpu: JsonObject) -> list[MachineType]:
    v0_name = fields.text(gpu, "v0Name", "")
    features = fields.obj(gpu, "network_features")
    if not v0_name or not features.get("port_forwarding_available", True):
        return []
    limits, rates = fields.obj(gpu, "resources"), fields.obj(gpu, "pricing")
    max_vcpus, max_ram = fields.integer(limits, "max_vcpus", 0), fields.integer(limits, "max_ram_gb", 0)
    name, memory = accelerator(v0_name)
    kinds = []
    for count in (n for n in GPU_COUNTS if n <= fields.integer(gpu, "max_count", 0)):
        sizes = sorted({min(per * count, max_vcpus - max_vcpus % 2) for per in VCPUS_PER_GPU})
        for vcpus in (v for v in sizes if v >= 2):
            ram = min(4 * vcpus, max_ram - max_ram % RAM_STEP_GB)
            if ram < RAM_STEP_GB:
                continue
            hourly = (
                fields.number(gpu, "price_per_hr", 0) * count
                + fields.number(rates, "per_vcpu_hr", 0) * vcpus
                + fields.number(rates, "per_gb_ram_hr", 0) * ram
                + fields.number(rates, "per_gb_storage_hr", 0) * MIN_STORAGE_GB
            )
            if hourly <= 0:
                continue
            kinds.append(
                MachineType(
                    name=f"{count}x {v0_name} {vcpus}vCPU {ram}GB",
                    vcpus=float(vcpus),
                    memory_gb=float(ram),
                    price=hourly,
                    region=place,
                    accelerator=name,
                    accelerator_count=count,
                    accelerator_memory_gb=memory,
                    disk_gb=fields.number(limits, "max_storage_gb", 0) or None,
                    ref=f"{location} {v0_name}",
                )
            )
    return kinds


def _flat(item: JsonObject) -> JsonObject:
    """An instance with its ``attributes`` (the list's shape) merged in (the get's shape)."""
    attributes = item.get("attributes")
    return {**item, **attributes} if isinstance(attributes, Mapping) else item


def ssh_port(forwards: object) -> int | None:
    """The external port forwarded to port 22, from a list of ``{internal_port,
    external_port}`` or a map of internal port to external port; None when there is none."""
    if isinstance(forwards, Mapping):
        found = forwards.get(str(SSH_PORT)) or forwards.get(SSH_PORT)
        return fields.to_integer(found, "portForwards") if found else None
    for forward in forwards if isinstance(forwards, list) else []:
        if isinstance(forward, Mapping) and fields.integer(forward, "internal_port", 0) == SSH_PORT:
            external = fields.integer(forward, "external_port", 0)
            return external or None
    return None


def _machine(raw: JsonObject) -> Machine:
    vm = _flat(raw)
    status = fields.text(vm, "status", "").lower().replace("_", "").replace(" ", "")
    host = fields.text(vm, "ipAddress", "") or None
    port = ssh_port(vm.get("portForwards"))
    state: MachineState = (
        "ended"
        if status in ENDED
        else "stopped"
        if status in STOPPED
        else ("running" if status == "running" and host and port else "starting")
    )
    return Machine(
        fields.text(vm, "id"), fields.text(vm, "name", ""), state, ssh_host=host, ssh_port=port or SSH_PORT,
        hourly_price=fields.number_or_none(vm, "rateHourly"),
        machine_type=_gpus(fields.obj(vm, "resources").get("gpus")),
    )


def _gpus(gpus: object) -> str:
    """The GPU ids of an instance's resources (a map by id, or a list of ``gpuV0Name``)."""
    if isinstance(gpus, Mapping):
        return ",".join(str(name) for name in gpus)
    listed = gpus if isinstance(gpus, list) else []
    return ",".join(fields.text(g, "gpuV0Name", "") for g in listed if isinstance(g, Mapping))
