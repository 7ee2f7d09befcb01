"""Hyperstack's Infrahub API (``infrahub-api.nexgencloud.com/v1``) as ``MachineAPI``:
flavors (``GET /core/flavors``) priced per GPU by the pricebook (``GET /pricebook``), OS
images (``GET /core/images``), one environment per pool (``POST/GET/DELETE
/core/environments``) holding the pool's keypair (``POST/GET /core/keypairs``, ``DELETE
/core/keypair/{id}``), and virtual machines (``POST/GET /core/virtual-machines``, ``GET``
and ``DELETE /core/virtual-machines/{id}``). Every VM is created with a floating IP and
firewall rules that admit SSH from anywhere and anything from the environment's private
network only (Hyperstack admits no inbound traffic that no rule allows). The key is sent
in the ``api_key`` header: ``api_key=`` or ``HYPERSTACK_API_KEY``."""

from __future__ import annotations

import re

from skyward.core.accelerator_catalog import identify
from skyward.providers.cloud import credentials, fields
from skyward.providers.cloud.api import Key, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, base_url, capacity_errors

URL = "https://infrahub-api.nexgencloud.com/v1"
API_KEY = credentials.Source(("HYPERSTACK_API_KEY",))
PAGE = 100
PAGES = 50
"""Lists of VMs, keypairs and environments come in pages of ``PAGE``; at most ``PAGES`` are read."""
NO_CAPACITY = ("not enough", "insufficient", "out of stock", "no stock", "capacity")
SPOT_SUFFIX = "-spot"
PRIVATE_NETWORK = "10.0.0.0/8"
"""Where an environment's private addresses come from: the rule that admits the pool's peers."""
SPELLINGS = {"A6000-ADA": "RTX 6000 Ada"}
"""Hyperstack GPU names the catalog does not read as they are."""
STOPPED = ("SHUTOFF", "HIBERNATED", "HIBERNATING", "ERROR", "STOPPED")
ENDED = ("DELETING", "DELETED")


def security_rules() -> list[dict[str, object]]:
    """Inbound SSH from anywhere, inbound TCP and UDP from the environment's private network."""
    ssh: dict[str, object] = {
        "direction": "ingress",
        "protocol": "tcp",
        "ethertype": "IPv4",
        "remote_ip_prefix": "0.0.0.0/0",
        "port_range_min": 22,
        "port_range_max": 22,
    }
    peers: list[dict[str, object]] = [
        {
            "direction": "ingress",
            "protocol": protocol,
            "ethertype": "IPv4",
            "remote_ip_prefix": PRIVATE_NETWORK,
        }
        for protocol in ("tcp", "udp")
    ]
    return [ssh, *peers]


class HyperstackAPI:
    """Calls Hyperstack in ``region`` with ``api_key`` (None: ``HYPERSTACK_API_KEY``)."""

    def __init__(self, region: str, api_key: str | None = None) -> None:
        key = credentials.given_or_found("Hyperstack", api_key, API_KEY)
        self._region = region
        self._images: dict[str, str] = {}
        self._http = ApiClient(
            "Hyperstack",
            base_url("hyperstack", URL),
            lambda: {"api_key": key},
            f"Hyperstack(api_key=...) or {API_KEY.describe()}",
        )

    def machine_types(self, region: str | None) -> list[MachineType]:
        """Flavors in stock in ``region``, each priced at its GPU's pricebook price times its
        GPU count; a flavor whose GPU ends in ``-spot`` is sold as spot only. Flavors the
        pricebook gives no price (CPU-only ones) are not offered."""
        params = {"region": region} if region else None
        groups = fields.objects(
            fields.as_object(self._http.call("GET", "/core/flavors", "listing flavors", params=params)), "data"
        )
        book = self._http.call("GET", "/pricebook", "reading the pricebook")
        prices = _pricebook(fields.as_objects(book, "the pricebook"))
        kinds = []
        for group in groups:
            for flavor in fields.objects(group, "flavors"):
                gpu, count = fields.text(flavor, "gpu", ""), fields.integer(flavor, "gpu_count", 0)
                hourly = prices.get(gpu.upper(), 0.0) * count
                if not flavor.get("stock_available", True) or not gpu or hourly <= 0:
                    continue
                spot = gpu.lower().endswith(SPOT_SUFFIX)
                accelerator = _accelerator(gpu)
                seen = identify(accelerator)
                where = fields.text(flavor, "region_name", "") or fields.text(group, "region_name", "") or region
                kinds.append(
                    MachineType(
                        name=fields.text(flavor, "name"),
                        vcpus=fields.number(flavor, "cpu", 0),
                        memory_gb=fields.number(flavor, "ram", 0),
                        price=None if spot else hourly,
                        spot_price=hourly if spot else None,
                        region=where or "",
                        accelerator=accelerator,
                        accelerator_count=count,
                        accelerator_memory_gb=seen.memory_gb if seen is not None else None,
                        disk_gb=fields.number(flavor, "disk", 0) or None,
                    )
                )
        return kinds

    def add_key(self, name: str, public_key: str) -> str | None:
        """The environment ``name`` in this region, then the keypair ``name`` in it; the
        environment is deleted again if the keypair cannot be imported."""
        answer = self._http.call(
            "POST",
            "/core/environments",
            f"creating environment {name}",
            json={"name": name, "region": self._region},
        )
        environment = fields.text(fields.obj(fields.as_object(answer), "environment"), "id")
        with self._http.removed_on_error(f"/core/environments/{environment}", f"deleting environment {name}"):
            answer = self._http.call(
                "POST",
                "/core/keypairs",
                f"importing keypair {name}",
                json={"name": name, "environment_name": name, "public_key": public_key},
            )
        return fields.text(fields.obj(fields.as_object(answer), "keypair"), "id")

    def remove_key(self, key_id: str) -> None:
        """The keypair, then its environment when that bears the keypair's name (ours)."""
        found = next((k for k in self._keypairs() if fields.text(k, "id") == key_id), None)
        self._http.remove(f"/core/keypair/{key_id}", f"deleting keypair {key_id}")
        if found is None:
            return
        name = fields.text(found, "name", "")
        for environment in self._pages("/core/environments", "environments", "listing environments"):
            if environment.get("name") == name == _environment_name(found):
                self._http.remove(
                    f"/core/environments/{fields.text(environment, 'id')}", f"deleting environment {name}"
                )

    def keys(self) -> list[Key]:
        return [Key(fields.text(k, "id"), fields.text(k, "name", "")) for k in self._keypairs()]

    def create(self, order: Order) -> str:
        """One VM of the order's flavor in the pool's environment (``order.group``), with
        its keypair, a floating IP and ``security_rules()``."""
        body: dict[str, object] = {
            "name": order.name,
            "environment_name": order.group,
            "key_name": order.group,
            "image_name": order.image or self._newest_image(),
            "flavor_name": order.machine_type.name,
            "assign_floating_ip": True,
            "enable_port_randomization": False,
            "count": 1,
            "user_data": order.user_data,
            "security_rules": security_rules(),
        }
        kind = order.machine_type
        with capacity_errors(NO_CAPACITY, f"Hyperstack has no {kind.name} in {kind.region}"):
            answer = self._http.call("POST", "/core/virtual-machines", f"creating VM {order.name}", json=body)
        instances = fields.objects(fields.as_object(answer), "instances")
        if len(instances) != 1:
            raise CloudError(
                f"Hyperstack answered creating VM {order.name} with {len(instances)} VMs "
                "instead of one"
            )
        return fields.text(instances[0], "id")

    def get(self, machine_id: str) -> Machine | None:
        answer = self._http.read(f"/core/virtual-machines/{machine_id}", f"reading VM {machine_id}")
        instance = fields.obj(fields.as_object(answer), "instance")
        return _machine(instance) if instance else None

    def machines(self) -> list[Machine]:
        """Every VM of the account (every page)."""
        return [_machine(item) for item in self._pages("/core/virtual-machines", "instances", "listing VMs")]

    def delete(self, machine_id: str) -> None:
        self._http.remove(f"/core/virtual-machines/{machine_id}", f"deleting VM {machine_id}")

    def _keypairs(self) -> list[JsonObject]:
        return self._pages("/core/keypairs", "keypairs", "listing keypairs")

    def _pages(self, path: str, key: str, what: str) -> list[JsonObject]:
        """The ``key`` items of every page of ``GET path`` (``page``, ``pageSize``): up to
        the ``count`` the answers give, else until a page comes back short (``PAGES`` at most)."""
        found: list[JsonObject] = []
        for page in range(1, PAGES + 1):
            answer = fields.as_object(self._http.call("GET", path, what, params={"page": page, "pageSize": PAGE}))
            listed = fields.objects(answer, key)
            found.extend(listed)
            total = answer.get("count")
            done = len(found) >= total if isinstance(total, int) and not isinstance(total, bool) else len(listed) < PAGE
            if done or not listed:
                break
        return found

    def _newest_image(self) -> str:
        """The newest Ubuntu image with CUDA in the region (any Ubuntu when none has CUDA);
        CloudError when the region lists no Ubuntu image."""
        if self._region not in self._images:
            answer = fields.as_object(
                self._http.call(
                    "GET", "/core/images", "listing images", params={"region": self._region}
                )
            )
            images = [
                i
                for group in fields.objects(answer, "images")
                for i in fields.objects(group, "images")
                if "ubuntu" in fields.text(i, "name", "").lower()
            ]
            if not images:
                raise CloudError(
                    f"Hyperstack lists no Ubuntu image in {self._region}; "
                    "give sky.Hyperstack(image_name=...)"
                )
            images.sort(key=_newness, reverse=True)
            self._images[self._region] = fields.text(images[0], "name")
        return self._images[self._region]


def _pricebook(entries: list[JsonObject]) -> dict[str, float]:
    """Hourly price per GPU by upper-case resource name (entries without a price left out)."""
    prices = {}
    for entry in entries:
        try:
            value = fields.number(entry, "value", 0)
            name = fields.text(entry, "name", "")
        except ValueError:  # CloudAnswerError: a price or name that is not one
            continue
        if name and value > 0:
            prices[name.upper()] = value
    return prices


def _newness(image: JsonObject) -> tuple[bool, tuple[int, ...], int]:
    """How an image ranks, newest last: with CUDA first, then by the version numbers in its
    name (``Ubuntu Server 24.04 LTS R570 CUDA 12.8``: 24, 4, 570, 12, 8), then by id.
    Hyperstack's images carry no creation time."""
    name = fields.text(image, "name", "")
    numbers = tuple(int(n) for n in re.findall(r"\d+", name))
    return "cuda" in name.lower(), numbers, fields.integer(image, "id", 0)


def _environment_name(keypair: JsonObject) -> str:
    """The name of a keypair's environment: Hyperstack gives the environment as an object
    (its id, name and region); a name alone is read too."""
    environment = keypair.get("environment")
    if isinstance(environment, dict):
        return fields.text(environment, "name", "")
    return environment if isinstance(environment, str) else ""


def _accelerator(gpu: str) -> str:
    """A Hyperstack GPU name as the catalog reads it: ``A100-80G-PCIe-NVLink-spot`` ->
    ``A100-80G-PCIe``; names the catalog does not know are passed on as they are."""
    base = gpu.removesuffix(SPOT_SUFFIX).removesuffix("-SPOT").removesuffix("-Spot")
    base = base.removesuffix("-NVLink").removesuffix("-NVLINK")
    return SPELLINGS.get(base.upper(), base)


def _machine(vm: JsonObject) -> Machine:
    status = fields.text(vm, "status", "").upper()
    public = fields.text(vm, "floating_ip", "") or None
    state: MachineState = (
        "ended"
        if status in ENDED
        else "stopped"
        if status in STOPPED
        else ("running" if status == "ACTIVE" and public else "starting")
    )
    created = epoch(vm.get("created_at"))
    return Machine(
        fields.text(vm, "id"), fields.text(vm, "name", ""), state, ssh_host=public,
        private_ip=fields.text(vm, "fixed_ip", "") or None,
        machine_type=fields.text(fields.obj(vm, "flavor"), "name", ""), created=created,
    )
