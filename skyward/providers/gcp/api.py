"""Compute Engine's REST API v1 (``compute.googleapis.com/compute/v1``) as ``MachineAPI``
and ``FirewallAPI``, for one project and zone: machine types (``GET
zones/{zone}/machineTypes``) and GPU types (``GET zones/{zone}/acceleratorTypes``) priced
live from the Cloud Billing Catalog (``GET services/6F81-5844-456A/skus`` on
``cloudbilling.googleapis.com/v1``, or ``$SKYWARD_GCP_BILLING_API_URL``), else from the
shipped snapshot (``prices``), instances (``POST/GET zones/{zone}/instances``,
``GET/DELETE zones/{zone}/instances/{name}``) and firewall rules (``POST/GET
global/firewalls``, ``DELETE global/firewalls/{name}``). A call that changes something
answers with a long-running operation, polled (``GET zones/{zone}/operations/{name}`` or
``global/operations/{name}``) until DONE within a timeout; an operation that ends in an
error is read (a zone out of resources or a GPU quota spent is "no capacity").

Each instance carries the pool's SSH key in its ``ssh-keys`` metadata (and in its startup
script, for root), the pool's network tag (its group) and the labels ``skyward-pool``,
``skyward-owner`` and ``skyward-expires``; each pool's network tag is admitted by two
firewall rules of its own: ``<group>-ssh`` (tcp:22 from anywhere) and ``<group>-peers``
(everything from the pool's own instances). Lists are paged (``pageToken``). Tokens:
``auth.GoogleToken``."""

from __future__ import annotations

import datetime
import re
import shlex
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from skyward.core.validation import fail
from skyward.providers.aws.machines import owner
from skyward.providers.base import PriceSnapshotWarning
from skyward.providers.cloud import fields, naming
from skyward.providers.cloud.api import Firewall, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CapacityError, CloudAPIError, CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, Params, base_url, message
from skyward.providers.cloud.keys import KeysInOrders
from skyward.providers.gcp import prices as pricing
from skyward.providers.gcp.auth import where

URL = "https://compute.googleapis.com/compute/v1"
OPERATION_TIMEOUT = 600.0
OPERATION_POLL = 1.0
PAGE = 500
MAX_BILLING_PAGES = 200
"""Compute Engine's largest page (``maxResults``)."""
DEFAULT_DISK_GB = 50
SSH_USER = "root"
LABEL_POOL = "skyward-pool"
LABEL_OWNER = "skyward-owner"
LABEL_EXPIRES = "skyward-expires"
RULE_SUFFIXES = ("-ssh", "-peers")
NO_CAPACITY = (
    "ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "QUOTA_EXCEEDED",
    "RESOURCE_NOT_AVAILABLE", "STOCKOUT",
)
"""Operation error codes that mean "not now, not here": the launch tries the next offer."""
STATES: dict[str, MachineState] = {
    "PROVISIONING": "starting", "STAGING": "starting", "RUNNING": "running", "REPAIRING": "starting",
    "STOPPING": "stopped", "SUSPENDING": "stopped", "SUSPENDED": "stopped", "TERMINATED": "stopped",
}
_LABEL_TEXT = re.compile(r"[^a-z0-9_-]")
_HALT = re.compile(r"shutdown -h \+(\d+)")


class GCPAPI(KeysInOrders):
    """Calls Compute Engine for ``project`` in ``zone`` on ``network``, authenticated by
    ``headers`` (``GoogleToken.headers``). ``operation_timeout``: seconds an operation may
    take before CloudError."""

    def __init__(
        self, project: str, zone: str, network: str, headers: Callable[[], dict[str, str]],
        operation_timeout: float = OPERATION_TIMEOUT,
    ) -> None:
        self._zone = zone
        self._network = f"projects/{project}/global/networks/{network}"
        """The network's resource name (Compute Engine takes it where a URL goes)."""
        self._timeout = operation_timeout
        self._headers = headers
        self._http = ApiClient("GCP", base_url("gcp", URL), headers, where())
        self._billing = ApiClient("GCP Cloud Billing", base_url("gcp_billing", pricing.BILLING_URL), headers, where())
        self._base = f"/projects/{project}"
        self._in_zone = f"{self._base}/zones/{zone}"

    # ------------------------------------------------------------------ offers

    def machine_types(self, region: str | None) -> list[MachineType]:
        """The zone's machine types skyward offers (GPUs of a2/a3/g2 types included) and N1
        machines with each GPU type of the zone that attaches to them, priced live from the
        Billing Catalog, else from the snapshot with a ``PriceSnapshotWarning`` (see
        ``prices``). ValueError for a zone in a region neither prices."""
        if region is not None and region != self._zone:
            raise fail("Spec", "region", region, f"this sky.GCP works in zone {self._zone}; give GCP(zone={region!r})")
        where = pricing.region_of(self._zone)
        rates, why = self._rates(where)
        snapshot = pricing.prices(where)
        date = pricing.snapshot_date()
        if not rates and snapshot is None:
            raise fail(
                "GCP", "zone", self._zone,
                f"{why}, and skyward's GCP "
                f"price snapshot covers {', '.join(pricing.regions())}; pick a zone in one of them",
            )
        if why:
            warnings.warn(
                f"GCP prices in {where} are from skyward's snapshot of {date}, not live: {why}. Live prices return "
                f"once the Cloud Billing Catalog API answers: {pricing.ENABLE}",
                PriceSnapshotWarning, stacklevel=2,
            )
        missing: set[str] = set()

        def priced(family: str, vcpus: float, memory: float, gpus: list[tuple[str, int]],
                   snapshot_price: tuple[float, float] | None) -> tuple[tuple[float, float | None], str] | None:
            live = pricing.price_of(rates, family, vcpus, memory, gpus) if rates else None
            if live is not None:
                return live, pricing.LIVE
            if snapshot_price is None:
                return None
            if not why:
                missing.add(" + ".join([family, *(gpu for gpu, _ in gpus)]))
            return snapshot_price, f"snapshot {date}"

        types = self._pages(f"{self._in_zone}/machineTypes", "listing machine types")
        listed = {fields.text(t, "name"): t for t in types}
        kinds: list[MachineType] = []
        for name in pricing.offered():
            if name not in listed or listed[name].get("deprecated"):
                continue
            base = self._kind(listed[name], name)
            gpus = [(gpu, count) for gpu, count in _accelerators(listed[name]) if count]
            found = priced(name.split("-")[0], base.vcpus, base.memory_gb, gpus,
                           snapshot.machines.get(name) if snapshot else None)
            if found is not None:
                (price, spot), source = found
                kinds.append(replace(base, price=price, spot_price=spot, price_source=source))
        for gpu in self._pages(f"{self._in_zone}/acceleratorTypes", "listing accelerator types"):
            name = fields.text(gpu, "name", "")
            if name not in pricing.ATTACHABLE:
                continue
            for count, machine in pricing.ATTACHED:
                if machine not in listed or count > fields.integer(gpu, "maximumCardsPerInstance", 0):
                    continue
                base = self._kind(listed[machine], machine)
                both = None
                if snapshot and machine in snapshot.machines and name in snapshot.gpus:
                    (m_od, m_spot), (g_od, g_spot) = snapshot.machines[machine], snapshot.gpus[name]
                    both = (round(m_od + count * g_od, 6), round(m_spot + count * g_spot, 6))
                found = priced("n1", base.vcpus, base.memory_gb, [(name, count)], both)
                if found is None:
                    continue
                (price, spot), source = found
                model, memory = pricing.GPUS[name]
                kinds.append(replace(
                    base, name=f"{machine}+{count}x{name}", price=price, spot_price=spot, accelerator=model,
                    accelerator_count=count, accelerator_memory_gb=memory, ref=f"{machine} {name} {count}",
                    price_source=source,
                ))
        if missing:
            warnings.warn(
                f"GCP prices in {where} of {', '.join(sorted(missing))} are from skyward's snapshot of {date}, not "
                "live: the Cloud Billing Catalog has no price for them there",
                PriceSnapshotWarning, stacklevel=2,
            )
        return kinds

    def _rates(self, region: str) -> tuple[pricing.Rates, str]:
        """The region's unit prices from the Billing Catalog (read at most once a day), and
        why there are none ("" when it was read)."""
        url = base_url("gcp_billing", pricing.BILLING_URL)
        catalog = pricing.cached(url)
        if catalog is None:
            self._headers()  # credentials Google refuses are an error here, not a reason for the snapshot
            try:
                catalog = pricing.read_catalog(self._skus())
            except Exception as exc:
                return {}, str(exc)
            pricing.keep(url, catalog)
        if region not in catalog:
            return {}, f"the Cloud Billing Catalog has no Compute Engine prices in {region}"
        return catalog[region], ""

    def _skus(self) -> Iterator[JsonObject]:
        """Compute Engine's SKUs in the Billing Catalog, page by page."""
        token = ""
        for _ in range(MAX_BILLING_PAGES):
            query: Params = {"pageSize": pricing.PAGE_SIZE, **({"pageToken": token} if token else {})}
            answer = fields.as_object(self._billing.call("GET", pricing.SKUS_PATH, "reading Compute Engine prices",
                                                  params=query))
            yield from fields.objects(answer, "skus")
            token = fields.text(answer, "nextPageToken", "")
            if not token:
                return
        raise CloudError(f"the Cloud Billing Catalog had more than {MAX_BILLING_PAGES} pages of Compute Engine SKUs")

    def _kind(self, listed: JsonObject, name: str) -> MachineType:
        accelerator: str | None = None
        memory: float | None = None
        count = 0
        for kind, count in _accelerators(listed):
            accelerator, memory = pricing.GPUS.get(kind, (kind, None))
        return MachineType(
            name=name, vcpus=fields.number(listed, "guestCpus", 0),
            memory_gb=fields.number(listed, "memoryMb", 0) / 1024,
            price=None, region=self._zone, accelerator=accelerator, accelerator_count=count,
            accelerator_memory_gb=memory,
        )

    # ------------------------------------------------------------------ keys (in each order)

    # ------------------------------------------------------------------ instances

    def create(self, order: Order) -> str:
        """One instance of the order (its id: Compute Engine's numeric one), running its boot script as the
        startup script; waits for the insert operation. CapacityError when the zone has no
        room or a quota is spent; CloudError when the operation fails otherwise or is not
        done within the timeout (the instance is deleted then)."""
        body = self._instance_body(order)
        try:
            operation = self._http.call("POST", f"{self._in_zone}/instances", f"creating instance {order.name}", json=body)
        except CloudAPIError as exc:
            if _capacity(exc.body):
                raise CapacityError(f"GCP has no {order.machine_type.name} in {self._zone} now: {message(exc.body)}") from None
            raise
        try:
            done = self._wait(operation, f"creating instance {order.name}")
        except CapacityError as exc:
            raise CapacityError(f"GCP has no {order.machine_type.name} in {self._zone} now: {exc}") from None
        except CloudError:
            self.delete(order.name)
            raise
        return fields.text(done, "targetId", order.name)

    def _instance_body(self, order: Order) -> dict[str, object]:
        kind = order.machine_type
        machine, gpu, count = _parts(kind)
        scheduling: dict[str, object] = {"onHostMaintenance": "TERMINATE" if (gpu or kind.accelerator) else "MIGRATE",
                                      "automaticRestart": False}
        if order.spot:
            scheduling.update(provisioningModel="SPOT", instanceTerminationAction="DELETE")
        named = naming.parse(order.name)
        labels = {LABEL_POOL: named.pool if named else _label(order.name), LABEL_OWNER: _label(owner())}
        halt = _HALT.search(order.user_data)
        if halt:
            moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=int(halt.group(1)))
            labels[LABEL_EXPIRES] = moment.strftime("%Y%m%dt%H%M%Sz")
        body: dict[str, object] = {
            "name": order.name,
            "machineType": f"zones/{self._zone}/machineTypes/{machine}",
            "labels": labels,
            "tags": {"items": [order.group]},
            "metadata": {"items": [
                {"key": "ssh-keys", "value": f"{SSH_USER}:{order.public_key} {SSH_USER}"},
                {"key": "startup-script", "value": _root_key(order.public_key) + order.user_data},
            ]},
            "disks": [{
                "boot": True, "autoDelete": True,
                "initializeParams": {"sourceImage": order.image, "diskSizeGb": str(order.disk_gb or DEFAULT_DISK_GB),
                                     "diskType": f"zones/{self._zone}/diskTypes/pd-balanced"},
            }],
            "networkInterfaces": [{
                "network": self._network,
                "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}],
            }],
            "scheduling": scheduling,
        }
        if gpu:
            body["guestAccelerators"] = [{"acceleratorType": f"zones/{self._zone}/acceleratorTypes/{gpu}",
                                          "acceleratorCount": count}]
        return body

    def get(self, machine_id: str) -> Machine | None:
        """The instance by its id (or name); None once Compute Engine no longer has it."""
        answer = self._http.read(f"{self._in_zone}/instances/{machine_id}", f"reading instance {machine_id}")
        found = fields.as_object(answer)
        return _machine(found) if found else None

    def machines(self) -> list[Machine]:
        """The zone's instances labelled ``skyward-pool``."""
        return [_machine(i) for i in self._pages(f"{self._in_zone}/instances", "listing instances")
                if LABEL_POOL in fields.obj(i, "labels")]

    def delete(self, machine_id: str) -> None:
        """Ask for the deletion (gone already is fine); ``get`` confirms it."""
        self._http.remove(f"{self._in_zone}/instances/{machine_id}", f"deleting instance {machine_id}")

    # ------------------------------------------------------------------ firewall

    def add_firewall(self, group: str) -> str:
        """The rules ``<group>-ssh`` (tcp:22 from anywhere) and ``<group>-peers`` (every
        protocol from instances tagged ``group``), both for instances tagged ``group``; the
        first is deleted again when the second cannot be made. Its id is ``group``."""
        rules: list[dict[str, object]] = [
            {"name": f"{group}-ssh", "network": self._network, "direction": "INGRESS", "priority": 1000,
             "sourceRanges": ["0.0.0.0/0"], "targetTags": [group], "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
             "description": "skyward: SSH to the pool's instances"},
            {"name": f"{group}-peers", "network": self._network, "direction": "INGRESS", "priority": 1000,
             "sourceTags": [group], "targetTags": [group], "allowed": [{"IPProtocol": "all"}],
             "description": "skyward: the pool's instances to each other"},
        ]
        made: list[str] = []
        try:
            for rule in rules:
                what = f"creating firewall rule {rule['name']}"
                self._wait(self._http.call("POST", f"{self._base}/global/firewalls", what, json=rule), what)
                made.append(str(rule["name"]))
        except BaseException:
            for name in made:
                self._delete_rule(name)
            raise
        return group

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        """Both rules of ``group``, each deletion waited for (gone already is fine)."""
        for suffix in RULE_SUFFIXES:
            self._delete_rule(f"{group}{suffix}")

    def firewalls(self) -> list[Firewall]:
        """One per group that has a skyward rule (its id and name: the group)."""
        groups: set[str] = set()
        for rule in self._pages(f"{self._base}/global/firewalls", "listing firewall rules"):
            name = fields.text(rule, "name", "")
            for suffix in RULE_SUFFIXES:
                if name.endswith(suffix) and naming.parse(name.removesuffix(suffix)) is not None:
                    groups.add(name.removesuffix(suffix))
        return [Firewall(group, group) for group in sorted(groups)]

    def _delete_rule(self, name: str) -> None:
        what = f"deleting firewall rule {name}"
        try:
            operation = self._http.call("DELETE", f"{self._base}/global/firewalls/{name}", what)
        except CloudAPIError as exc:
            if exc.status == 404:
                return
            raise
        self._wait(operation, what)

    # ------------------------------------------------------------------ helpers

    def _wait(self, operation: object, what: str) -> JsonObject:
        """Poll ``operation`` until DONE and return it; CapacityError or CloudError for an operation that
        failed, CloudError when it is not DONE within the timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            if not isinstance(operation, Mapping) or not operation.get("name"):
                raise CloudError(f"the GCP API answered {what} with no operation: {str(operation)[:200]}")
            if operation.get("status") == "DONE":
                break
            if time.monotonic() > deadline:
                raise CloudError(
                    f"GCP operation {operation['name']} ({what}) was not done within {self._timeout:g}s; "
                    "check it in the console (gcloud compute operations describe)"
                )
            time.sleep(OPERATION_POLL)
            zone = fields.text(operation, "zone", "")
            where = f"{self._base}/zones/{zone.rsplit('/', 1)[-1]}" if zone else f"{self._base}/global"
            operation = self._http.call("GET", f"{where}/operations/{operation['name']}", f"waiting for {what}")
        errors = fields.objects(fields.obj(operation, "error"), "errors")
        if errors:
            said = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors)
            if _capacity(operation.get("error")):
                raise CapacityError(said)
            raise CloudError(f"GCP could not finish {what}: {said}")
        return operation

    def _pages(self, path: str, what: str) -> list[JsonObject]:
        """Every item of a list, page by page (at most 50 pages)."""
        found: list[JsonObject] = []
        token = ""
        for _ in range(50):
            query: Params = {"maxResults": PAGE, **({"pageToken": token} if token else {})}
            answer = fields.as_object(self._http.call("GET", path, what, params=query))
            found.extend(fields.objects(answer, "items"))
            token = fields.text(answer, "nextPageToken", "")
            if not token:
                break
        return found


def _accelerators(listed: JsonObject) -> list[tuple[str, int]]:
    """The GPUs a machine type comes with: (accelerator type, count)."""
    return [(fields.text(a, "guestAcceleratorType", ""), fields.integer(a, "guestAcceleratorCount", 0))
            for a in fields.objects(listed, "accelerators")]


def _parts(kind: MachineType) -> tuple[str, str, int]:
    """The machine type to order, and the GPU type and count attached to it ("", 0: none);
    an N1 machine with GPUs carries them in ``ref`` ("n1-standard-4 nvidia-tesla-t4 1")."""
    if not kind.ref:
        return kind.name, "", 0
    machine, gpu, count = kind.ref.split(" ")
    return machine, gpu, int(count)


def _capacity(body: object) -> bool:
    """Whether an error body or an operation's error names a lack of capacity or quota."""
    said = str(body)
    return any(code in said for code in NO_CAPACITY)


def _label(value: str) -> str:
    """``value`` as a label value: lowercase letters, digits, ``_`` and ``-``, at most 63."""
    return _LABEL_TEXT.sub("-", value.lower())[:63]


def _root_key(public_key: str) -> str:
    """Startup-script lines that let root log in with the pool's key (an image's guest
    agent may not manage root's keys, and some images refuse root over SSH)."""
    return (
        "#!/bin/bash\n"
        "install -d -m 700 /root/.ssh\n"
        f"printf '%s\\n' {shlex.quote(public_key)} > /root/.ssh/authorized_keys\n"
        "chmod 600 /root/.ssh/authorized_keys\n"
        "sed -i -E 's/^#?PermitRootLogin.*/PermitRootLogin prohibit-password/' /etc/ssh/sshd_config\n"
        "systemctl reload ssh 2>/dev/null || systemctl reload sshd 2>/dev/null || true\n"
    )


def _first(found: list[JsonObject]) -> JsonObject:
    return found[0] if found else {}


def _machine(instance: JsonObject) -> Machine:
    interface = _first(fields.objects(instance, "networkInterfaces"))
    public = fields.text(_first(fields.objects(interface, "accessConfigs")), "natIP", "") or None
    state = STATES.get(fields.text(instance, "status", ""), "starting")
    if state == "running" and public is None:
        state = "starting"
    scheduling = fields.obj(instance, "scheduling")
    return Machine(
        fields.text(instance, "id"), fields.text(instance, "name"), state, public, 22,
        fields.text(interface, "networkIP", "") or None, None, scheduling.get("provisioningModel") == "SPOT",
        fields.text(instance, "machineType", "").rsplit("/", 1)[-1],
        epoch(instance.get("creationTimestamp")),
    )
