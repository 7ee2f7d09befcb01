"""JarvisLabs' REST API (the backend its ``jl`` CLI and ``jarvislabs`` SDK call) as
``MachineAPI``: GPU types with their hourly and spot prices and free GPUs per region
(``GET misc/server_meta``), SSH keys (``GET/POST ssh/``, ``DELETE ssh/{key_id}``: the
account's keys are installed in every instance it starts), instances (``POST
templates/{template}/create``, ``GET users/fetch`` and ``users/fetch/{machine_id}``,
``POST misc/destroy`` or ``templates/vm/destroy`` with ``machine_id``).

Each region has its own backend (``REGION_URLS``); reads go to the first. An instance
is a container of a framework template (``pytorch`` by default) or a VM (``vm``),
reached over SSH at the host and port of its ``ssh_str``. The token travels as a Bearer
token: ``api_key=``, ``$JL_API_KEY`` or ``token`` under ``[auth]`` in the CLI's
``~/.config/jl/config.toml``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import KeysInCollection, Machine, MachineState, MachineType, Order
from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, base_url, capacity_errors, message
from skyward.providers.cloud.keys import KeyCollection

REGION_URLS = {
    "india-noida-01": "https://backendn.jarvislabs.net",
    "india-chennai-01": "https://backendc.jarvislabs.net",
    "europe-01": "https://backendeu.jarvislabs.net",
}
"""As the ``jarvislabs`` SDK (0.2.17) has them: ``india-01`` (``backendprod``) was wound
down in 2026 and ``india-chennai-01`` took its place."""
READS = "india-noida-01"
"""The backend that lists instances, keys and GPU types for every region (the SDK's default)."""
API_KEY = credentials.Source(("JL_API_KEY",), "~/.config/jl/config.toml", "auth.token")
COUNTS = (1, 2, 4, 8)
"""The GPUs per instance offered (at most the region's free GPUs of the type)."""
EUROPE_COUNTS = (1, 8)
"""What JarvisLabs' Europe region rents."""
NO_CAPACITY = ("no free", "not available", "insufficient", "capacity", "out of stock", "try again later")
RUNNING = "running"
STOPPED = ("paused", "pausing", "failed")
ENDED = ("destroying", "destroyed", "deleted")
SSH = re.compile(r"-p\s+(?P<port>\d+)\s+(?:(?P<user>[^@\s]+)@)?(?P<host>[^\s]+)")
"""An ``ssh_str`` such as ``ssh -p 11014 root@sshe.jarvislabs.ai``."""
SPELLINGS = {
    "A5000": "RTX A5000",
    "A5000Pro": "RTX A5000",
    "A6000": "RTX A6000",
    "RTX6000Ada": "RTX 6000 Ada",
    "RTX5000": "Quadro RTX 5000",
    "A100": "A100 40GB",
    "A100-80GB": "A100 80GB",
}
"""JarvisLabs' GPU type names as the catalog reads them (its ``A100`` has 40 GB)."""
MIN_DISK_GB = 40
"""The storage the CLI orders by default, and the least skyward orders."""


class JarvisLabsAPI(KeysInCollection):
    """Calls JarvisLabs with ``api_key`` (None: ``$JL_API_KEY`` or the jl CLI's config)."""

    KEYS = KeyCollection("/ssh/", "key_id", "key_name", "ssh_key")

    def __init__(self, template: str, api_key: str | None = None) -> None:
        key = credentials.given_or_found("JarvisLabs", api_key, API_KEY)
        self.template = template
        by_address: dict[str, ApiClient] = {}
        self._clients: dict[str, ApiClient] = {}
        """Each region's backend (one, ``SKYWARD_JARVISLABS_API_URL``, when that is set)."""
        for region, url in REGION_URLS.items():
            address = base_url("jarvislabs", url)
            if address not in by_address:
                by_address[address] = ApiClient(
                    "JarvisLabs", address, lambda: {"Authorization": f"Bearer {key}"},
                    f"JarvisLabs(api_key=...) or {API_KEY.describe()}",
                )
            self._clients[region] = by_address[address]
        self._http = self._clients[READS]
        self._regions: dict[str, str] = {}
        """The region of each instance made here (its backend deletes it)."""

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Each GPU type of each region (of ``region``) at 1, 2, 4 and 8 GPUs (Europe: 1
        and 8), as many as the region has free, at its per-GPU hourly and spot prices."""
        answer = fields.as_object(self._http.call("GET", "/misc/server_meta", "listing GPU types"))
        kinds = []
        for item in fields.objects(answer, "server_meta"):
            place = fields.text(item, "region", "")
            workload = item.get("workload_type")
            if place not in REGION_URLS or (region is not None and place != region):
                continue
            if workload not in (None, "vm" if self.template == "vm" else "container"):
                continue
            price = fields.number(item, "price_per_hour", 0)
            spot = fields.number_or_none(item, "spot_price") if self.template != "vm" else None
            free = fields.integer(item, "num_free_devices", 0)
            name = fields.text(item, "gpu_type", "")
            accelerator, memory = _accelerator(name, fields.text(item, "vram", ""))
            for count in EUROPE_COUNTS if place == "europe-01" else COUNTS:
                if count > free or price <= 0:
                    continue
                kinds.append(
                    MachineType(
                        name=f"{count}x {name}",
                        vcpus=fields.number(item, "cpus_per_gpu", 0) * count,
                        memory_gb=fields.number(item, "ram_per_gpu", 0) * count,
                        price=price * count,
                        spot_price=spot * count if spot else None,
                        region=place,
                        accelerator=accelerator,
                        accelerator_count=count,
                        accelerator_memory_gb=memory,
                        ref=name,
                    )
                )
        return kinds

    def create(self, order: Order) -> str:
        """One instance of the order's GPUs (``ref`` the GPU type, ``accelerator_count`` how
        many) in its region, of the template ``order.image``, spot when asked, with
        ``order.disk_gb`` (at least 40) GB of storage. CapacityError when the region has
        no such GPUs free."""
        kind = order.machine_type
        region = str(kind.region or READS)
        body: dict[str, object] = {
            "gpu_type": kind.ref,
            "num_gpus": kind.accelerator_count,
            "hdd": max(MIN_DISK_GB, int(order.disk_gb or 0)),
            "region": region,
            "name": order.name,
            "is_spot": order.spot,
            "duration": "hour",
            "disk_type": "ssd",
            "http_ports": "",
            "script_id": None,
            "script_args": "",
            "fs_id": None,
            "arguments": "",
        }
        what = f"creating instance {order.name}"
        shortage = f"JarvisLabs has no {kind.name} free in {region}"
        with capacity_errors(NO_CAPACITY, shortage, statuses=(400, 409, 503)):
            answer = self._clients[region].call("POST", f"/templates/{order.image}/create", what, json=body)
        machine_id = fields.text(answer, "machine_id", "") if isinstance(answer, Mapping) else ""
        if not machine_id:
            said = message(answer)
            if any(t in said.lower() for t in NO_CAPACITY):
                raise CapacityError(f"{shortage}: {said}")
            raise CloudError(f"the JarvisLabs API answered {what} without a machine_id: {said}")
        self._regions[machine_id] = region
        return machine_id

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/users/fetch/{machine_id}", f"reading instance {machine_id}")
        instance = fields.obj(answer, "instance") if isinstance(answer, Mapping) else {}
        return _machine(instance) if instance else None

    def machines(self) -> list[Machine]:
        answer = fields.as_object(self._http.call("GET", "/users/fetch", "listing instances"))
        return [_machine(i) for i in fields.items(answer, "instances") if isinstance(i, Mapping)]

    def delete(self, machine_id: str) -> None:
        """Destroy the instance (VMs and containers have their own call) at its region's
        backend; one already gone is fine."""
        answer = self._http.read(f"/users/fetch/{machine_id}", f"reading instance {machine_id}")
        instance = fields.obj(answer, "instance") if isinstance(answer, Mapping) else {}
        if not instance or fields.text(instance, "status", "").lower() in ENDED:
            return
        region = fields.text(instance, "region", "") or self._regions.get(machine_id) or READS
        path = "/templates/vm/destroy" if instance.get("template") == "vm" else "/misc/destroy"
        client = self._clients.get(region, self._http)
        try:
            answer = client.call("POST", path, f"destroying instance {machine_id}", params={"machine_id": machine_id})
        except CloudAPIError as exc:
            if exc.status != 404:
                raise
            return
        if isinstance(answer, Mapping) and answer.get("success") is False:
            raise CloudError(f"the JarvisLabs API refused destroying instance {machine_id}: {message(answer)}")


def _accelerator(name: str, vram: str) -> tuple[str | None, float | None]:
    """A GPU type as the catalog reads it (``A6000`` -> ``RTX_A6000``, ``A100-80GB`` ->
    ``A100`` 80 GB) and one GPU's memory (``vram`` such as "48GB", else what the name or
    the catalog says); a type the catalog does not know is passed on as it is."""
    seen = identify(SPELLINGS.get(name, name))
    digits = re.search(r"(\d+(?:\.\d+)?)\s*G", vram, re.IGNORECASE)
    if digits:
        memory: float | None = float(digits.group(1))
    elif seen is not None:
        memory = seen.memory_gb or float(seen.model.variants[0].memory_gb)
    else:
        memory = None
    return (seen.model.name if seen is not None else name or None), memory


def _endpoint(ssh: str) -> tuple[str | None, int, str | None]:
    """The host, port and user (None: not named) of an ``ssh_str``."""
    found = SSH.search(ssh or "")
    return (found["host"], int(found["port"]), found["user"]) if found else (None, 22, None)


def _machine(instance: JsonObject) -> Machine:
    status = fields.text(instance, "status", "").lower()
    host, port, user = _endpoint(fields.text(instance, "ssh_str", "") or fields.text(instance, "ssh_command", ""))
    state: MachineState = (
        "ended" if status in ENDED else "stopped" if status in STOPPED
        else ("running" if status == RUNNING and host else "starting")
    )
    return Machine(
        fields.text(instance, "machine_id"),
        fields.text(instance, "name", "") or fields.text(instance, "instance_name", ""), state,
        ssh_host=host if state == "running" else None, ssh_port=port, spot=fields.flag(instance, "is_spot"),
        machine_type=f"{instance.get('num_gpus') or 1}x {instance.get('gpu_type') or ''}", ssh_user=user,
    )
