"""A local Compute Engine API v1 (``/compute/v1``) and Google's OAuth 2.0 token endpoint
(``/oauth2/token``) for one project and zone: ``GET zones/{zone}/machineTypes`` and
``acceleratorTypes``, ``POST/GET zones/{zone}/instances``, ``GET/DELETE
zones/{zone}/instances/{name}``, ``POST/GET global/firewalls``, ``DELETE
global/firewalls/{name}`` and ``GET zones/{zone}/operations/{name}`` and
``global/operations/{name}``, in Google's shapes: long-running operations (PENDING, then
DONE at the next read, or held RUNNING by ``hold_operations``), ``pageToken`` pages, the
``{"error": {"code", "message", "errors"}}`` body, a stockout reported as a DONE insert
operation whose error is ``ZONE_RESOURCE_POOL_EXHAUSTED``. Inserts are checked as
Compute Engine checks them (names, labels, machine and accelerator types of the zone,
GPUs only on N1 and with ``onHostMaintenance: TERMINATE``, ``SPOT`` with its termination
action, the image, the network); a request with a query parameter or a body field these
operations do not declare is refused as Google refuses an unknown name (400
``invalid``, naming it). A machine's host accepts the key of its ``ssh-keys``
metadata. A reclaimed spot instance is TERMINATED, with a ``compute.instances.preempted``
operation, then deleted (``instanceTerminationAction: DELETE``); one that halts itself is
TERMINATED and kept. Firewall rules are recorded, not enforced.

The Cloud Billing Catalog (``/v1``, ``SKYWARD_GCP_BILLING_API_URL``): ``GET
services/6F81-5844-456A/skus``, Compute Engine's SKUs in Google's shapes (description,
category with ``usageType`` OnDemand, Preemptible or Commit1Yr, ``serviceRegions``,
``pricingInfo`` with ``tieredRates`` of ``units`` and ``nanos``), pages of
``BILLING_PAGE`` by ``pageToken``, made-up prices for us-central1, us-east1 and
europe-west4 unlike the snapshot's; ``billing_without`` leaves families out and
``billing_disabled`` answers 403 ``SERVICE_DISABLED`` as Google does while the Cloud
Billing API is not enabled in the project.

Tokens: the service-account key ``credentials_file`` writes carries ``token_uri`` here
and a private key generated for the test; the endpoint checks the signed JWT grant (RS256,
issuer, audience, scope, expiry) with its public half and issues a token that lasts
``token_lifetime`` seconds."""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from cloud.fake_cloud import Answer, FakeCloud, FakeMachine, Operation, shape
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PROJECT = "skyward-test-1"
ZONE = "us-central1-a"
CLIENT_EMAIL = f"skyward@{PROJECT}.iam.gserviceaccount.com"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
AUDIENCE = "https://oauth2.googleapis.com/token"
"""A grant's audience: Google's token endpoint, wherever ``token_uri`` sends it."""
NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
NETWORKS = ("default",)


def _type(name: str, cpus: int, memory_gb: float, gpu: str | None = None, count: int = 0, **extra: Any) -> dict[str, Any]:
    kind: dict[str, Any] = {"kind": "compute#machineType", "name": name, "guestCpus": cpus,
                            "memoryMb": int(memory_gb * 1024), "zone": ZONE, "isSharedCpu": False, **extra}
    if gpu:
        kind["accelerators"] = [{"guestAcceleratorType": gpu, "guestAcceleratorCount": count}]
    return kind


MACHINE_TYPES = [
    _type("e2-standard-2", 2, 8), _type("e2-standard-4", 4, 16), _type("n2-standard-4", 4, 16),
    _type("n1-standard-4", 4, 15), _type("n1-standard-8", 8, 30), _type("n1-standard-16", 16, 60),
    _type("n1-standard-32", 32, 120),
    _type("g2-standard-4", 4, 16, "nvidia-l4", 1), _type("g2-standard-8", 8, 32, "nvidia-l4", 1),
    _type("g2-standard-24", 24, 96, "nvidia-l4", 2),
    _type("a2-highgpu-1g", 12, 85, "nvidia-tesla-a100", 1), _type("a2-ultragpu-1g", 12, 170, "nvidia-a100-80gb", 1),
    _type("m1-ultramem-40", 40, 961),  # not in the price snapshot: not offered
    _type("n1-standard-2", 2, 7.5, deprecated={"state": "DEPRECATED"}),
]
ACCELERATOR_TYPES = [
    {"kind": "compute#acceleratorType", "name": "nvidia-tesla-t4", "maximumCardsPerInstance": 4},
    {"kind": "compute#acceleratorType", "name": "nvidia-tesla-v100", "maximumCardsPerInstance": 8},
    {"kind": "compute#acceleratorType", "name": "nvidia-l4", "maximumCardsPerInstance": 8},
    {"kind": "compute#acceleratorType", "name": "nvidia-tesla-a100", "maximumCardsPerInstance": 16},
]
BILLING_SERVICE = "6F81-5844-456A"
"""Compute Engine's service id in the Cloud Billing Catalog."""
BILLING_PAGE = 7
"""The fake catalog's largest page (Google's is 5,000): every read takes several pages."""
AREAS = {"Americas": ["us-central1", "us-east1"], "EMEA": ["europe-west4"]}
"""Where the fake catalog's SKUs run (Google prices a family once for a whole area)."""
AREA_FACTOR = {"Americas": 1.0, "EMEA": 1.1}
FAMILY_RATES = {
    "E2": ((0.025, 0.008), (0.003, 0.001)), "N2": ((0.035, 0.01), (0.005, 0.0015)),
    "N1 Predefined": ((0.04, 0.01), (0.005, 0.001)), "G2": ((0.03, 0.012), (0.004, 0.0016)),
    "A2": ((0.035, 0.011), (0.005, 0.0015)), "A3": ((0.03, 0.01), (0.003, 0.001)),
}
"""Unit prices of the fake catalog, ((core on-demand, spot), (GiB of RAM on-demand, spot))
per hour in the Americas: made up, unlike any snapshot price, so a test can tell them apart."""
GPU_RATES = {
    "Nvidia Tesla T4": (0.4, 0.15), "Nvidia Tesla V100": (2.6, 1.0), "Nvidia Tesla P100": (1.5, 0.6),
    "Nvidia Tesla P4": (0.65, 0.25), "Nvidia L4": (0.6, 0.24), "Nvidia Tesla A100": (3.0, 1.0),
    "Nvidia Tesla A100 80GB": (4.0, 1.3), "Nvidia H100 80GB": (11.0, 3.0),
}
"""Per GPU per hour in the Americas (on-demand, spot)."""


def _sku(number: int, description: str, group: str, usage: str, regions: list[str], unit: str, price: float,
         family: str = "Compute") -> dict[str, Any]:
    units, nanos = divmod(round(price * 1e9), 10**9)
    return {
        "name": f"services/{BILLING_SERVICE}/skus/F{number:03d}-0000-0000", "skuId": f"F{number:03d}-0000-0000",
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family, "resourceGroup": group,
                     "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "effectiveTime": "2026-11-26T08:00:00.000Z", "summary": "",
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1, "baseUnitConversionFactor": 3600,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(units),
                                                                      "nanos": nanos}}],
            },
            "currencyConversionRate": 1,
        }],
        "serviceProviderName": "Google",
    }


def billing_skus() -> list[dict[str, Any]]:
    """The fake catalog: the SKUs of every family and GPU skyward offers, on demand and
    spot, in each area, among SKUs it must not read (commitments, custom and sole-tenant
    cores, other families, a workstation GPU, disks)."""
    skus: list[dict[str, Any]] = []
    serial = itertools.count(1)
    for area, regions in AREAS.items():
        factor = AREA_FACTOR[area]
        for family, (core, ram) in FAMILY_RATES.items():
            for part, rate, unit, group in (("Core", core, "h", "CPU"), ("Ram", ram, "GiBy.h", "RAM")):
                skus.append(_sku(next(serial), f"{family} Instance {part} running in {area}", group, "OnDemand",
                                 regions, unit, rate[0] * factor))
                skus.append(_sku(next(serial), f"Spot Preemptible {family} Instance {part} running in {area}", group,
                                 "Preemptible", regions, unit, rate[1] * factor))
                skus.append(_sku(next(serial), f"Commitment v1: {family} {part} in {area} for 1 Year", group,
                                 "Commit1Yr", regions, unit, rate[0] * factor * 0.6))
        for gpu, (ondemand, spot) in GPU_RATES.items():
            skus.append(_sku(next(serial), f"{gpu} GPU running in {area}", "GPU", "OnDemand", regions, "h",
                             ondemand * factor))
            skus.append(_sku(next(serial), f"{gpu} GPU attached to Spot Preemptible VMs running in {area}", "GPU",
                             "Preemptible", regions, "h", spot * factor))
        skus += [
            _sku(next(serial), f"N1 Custom Instance Core running in {area}", "CPU", "OnDemand", regions, "h", 0.001),
            _sku(next(serial), f"N2D AMD Instance Core running in {area}", "CPU", "OnDemand", regions, "h", 0.001),
            _sku(next(serial), f"Sole Tenancy Instance Core running in {area}", "CPU", "OnDemand", regions, "h", 0.001),
            _sku(next(serial), f"Nvidia Tesla T4 Virtual Workstation GPU running in {area}", "GPU", "OnDemand",
                 regions, "h", 0.001),
            _sku(next(serial), f"Storage PD Capacity in {area}", "PDStandard", "OnDemand", regions, "GiBy.mo", 0.04,
                 family="Storage"),
        ]
    return skus


IN_PROJECT = "/projects/{project}"
IN_ZONE = f"{IN_PROJECT}/zones/{{zone}}"
LISTED = ("maxResults", "pageToken")
INSTANCE = shape(
    "name", "description", "machineType", "labels", "canIpForward", "deletionProtection", "minCpuPlatform",
    "shieldedInstanceConfig", "confidentialInstanceConfig", "reservationAffinity", "hostname",
    "advancedMachineFeatures", "resourcePolicies", "displayDevice", "keyRevocationActionType", "labelFingerprint",
    "params",
    tags=shape("items", "fingerprint"),
    metadata=shape("kind", "fingerprint", items=shape("key", "value")),
    disks=shape(
        "boot", "autoDelete", "type", "mode", "deviceName", "source", "interface",
        initializeParams=shape("sourceImage", "diskSizeGb", "diskType", "diskName", "labels", "description",
                               "provisionedIops", "provisionedThroughput"),
    ),
    networkInterfaces=shape(
        "network", "subnetwork", "networkIP", "stackType", "nicType",
        accessConfigs=shape("type", "name", "natIP", "networkTier", "setPublicPtr", "publicPtrDomainName"),
    ),
    scheduling=shape("onHostMaintenance", "automaticRestart", "preemptible", "provisioningModel",
                     "instanceTerminationAction", "maxRunDuration", "terminationTime", "nodeAffinities",
                     "localSsdRecoveryTimeout", "minNodeCpus"),
    guestAccelerators=shape("acceleratorType", "acceleratorCount"),
    serviceAccounts=shape("email", "scopes"),
)
"""An ``Instance`` resource as an insert may give it."""
PERMITTED = shape("IPProtocol", "ports")
OPERATIONS = (
    Operation("POST", "/oauth2/token", body=shape("grant_type", "assertion")),
    Operation("GET", "/v1/services/{service}/skus", ("pageSize", "pageToken")),
    Operation("GET", f"{IN_ZONE}/machineTypes", LISTED),
    Operation("GET", f"{IN_ZONE}/acceleratorTypes", LISTED),
    Operation("GET", f"{IN_ZONE}/instances", LISTED),
    Operation("POST", f"{IN_ZONE}/instances", body=INSTANCE),
    Operation("GET", f"{IN_ZONE}/instances/{{instance}}"),
    Operation("DELETE", f"{IN_ZONE}/instances/{{instance}}"),
    Operation("GET", f"{IN_ZONE}/operations/{{operation}}"),
    Operation("GET", f"{IN_PROJECT}/global/firewalls", LISTED),
    Operation("POST", f"{IN_PROJECT}/global/firewalls", body=shape(
        "name", "description", "network", "priority", "sourceRanges", "destinationRanges", "sourceTags", "targetTags",
        "sourceServiceAccounts", "targetServiceAccounts", "direction", "disabled",
        allowed=PERMITTED, denied=PERMITTED, logConfig=shape("enable", "metadata"),
    )),
    Operation("DELETE", f"{IN_PROJECT}/global/firewalls/{{firewall}}"),
    Operation("GET", f"{IN_PROJECT}/global/operations/{{operation}}"),
)
"""The operations of Compute Engine, the Cloud Billing Catalog and the token endpoint
the fake serves, with the fields Google documents."""
REASONS = {400: "invalid", 404: "notFound", 405: "methodNotAllowed"}
N1_GPUS = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4")
STATUS = {"pending": "PROVISIONING", "booting": "STAGING", "running": "RUNNING", "exited": "TERMINATED"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _stamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).astimezone(
        datetime.timezone(datetime.timedelta(hours=-8))).isoformat(timespec="milliseconds")


def _error(status: int, message: str, reason: str) -> Answer:
    return Answer(status, {"error": {"code": status, "message": message,
                                     "errors": [{"message": message, "domain": "global", "reason": reason}]}})


class FakeGCP(FakeCloud):
    name = "gcp"
    prefix = "/compute/v1"
    operations = OPERATIONS
    pinned = "gcp"

    def __init__(self) -> None:
        super().__init__()
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.tokens: dict[str, float] = {}
        """Issued access tokens and when each expires."""
        self.grants: list[dict[str, Any]] = []
        """The claims of every accepted JWT grant."""
        self.token_lifetime = 3600
        self.hold_operations = False
        self.long_running: dict[str, dict[str, Any]] = {}
        """Its long-running operations (inserts, deletions, preemptions) by name."""
        self._serials = itertools.count(1)
        self._folder: Path | None = None
        self.billing_disabled = False
        """The Cloud Billing API is not enabled in the project: its catalog answers 403 SERVICE_DISABLED."""
        self.billing_queries: list[dict[str, str]] = []
        """The query of every read of the catalog's SKUs."""
        self.billing_without: set[str] = set()
        """Families or GPUs ("G2", "Nvidia L4") whose SKUs the catalog leaves out."""

    # ------------------------------------------------------------------ credentials

    def credentials_file(self, folder: Path, **changes: Any) -> Path:
        """A service-account key for this fake's project in ``folder`` (``changes``
        replace or, with None, drop its fields)."""
        info: dict[str, Any] = {
            "type": "service_account", "project_id": PROJECT, "private_key_id": "k1",
            "private_key": self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode(),
            "client_email": CLIENT_EMAIL, "client_id": "1", "token_uri": self.token_uri,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        }
        info.update(changes)
        info = {k: v for k, v in info.items() if v is not None}
        path = folder / f"gcp-key-{next(self._serials)}.json"
        path.write_text(json.dumps(info))
        path.chmod(0o600)
        return path

    @property
    def token_uri(self) -> str:
        return self.url.removesuffix(self.prefix) + "/oauth2/token"

    def stop(self) -> None:
        super().stop()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def env(self) -> dict[str, str]:
        import tempfile

        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="fake-gcp-"))
        return {"SKYWARD_GCP_API_URL": self.url, "SKYWARD_GCP_BILLING_API_URL": self.billing_url,
                "GOOGLE_APPLICATION_CREDENTIALS": str(self.credentials_file(self._folder))}

    @property
    def billing_url(self) -> str:
        """The Cloud Billing API v1 (``cloudbilling.googleapis.com/v1``) on this fake."""
        return self.url.removesuffix(self.prefix) + "/v1"

    def authorized(self, headers: Any) -> bool:
        given = str(headers.get("Authorization") or "").removeprefix("Bearer ")
        return self.tokens.get(given, 0.0) > time.time()

    def _token(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" or not body.get("assertion"):
            raise Answer(400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"})
        try:
            head, claims_text, signature = str(body["assertion"]).split(".")
            self.key.public_key().verify(_unb64(signature), f"{head}.{claims_text}".encode(), padding.PKCS1v15(),
                                         hashes.SHA256())
            header, claims = json.loads(_unb64(head)), json.loads(_unb64(claims_text))
        except (ValueError, InvalidSignature):
            raise Answer(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}) from None
        now = time.time()
        if header.get("alg") != "RS256" or claims.get("iss") != CLIENT_EMAIL or claims.get("aud") != AUDIENCE:
            raise Answer(400, {"error": "invalid_grant", "error_description": "Invalid JWT: issuer or audience"})
        if SCOPE not in str(claims.get("scope", "")).split() or not claims.get("iat", 0) - 300 <= now < claims.get("exp", 0):
            raise Answer(400, {"error": "invalid_scope", "error_description": "Invalid JWT: scope or time"})
        self.grants.append(claims)
        token = f"ya29.fake-{next(self._serials)}"
        self.tokens[token] = now + self.token_lifetime
        return {"access_token": token, "expires_in": self.token_lifetime, "token_type": "Bearer"}

    # ------------------------------------------------------------------ machines

    def error(self, status: int, text: str) -> Answer:
        return _error(status, text, REASONS.get(status, "backendError"))

    def no_capacity(self, kind: str) -> Answer:
        raise AssertionError("a stockout is an operation's error on Compute Engine (see _insert)")

    def plant(self, name: str, kind: str, price: float = 0.5, tags: tuple[str, ...] = ()) -> FakeMachine:
        machine = super().plant(name, kind, price, tags)
        machine.extra["labels"] = {"skyward-pool": name.split("-")[1]}
        return machine

    def reclaim(self, machine_id: str) -> None:
        """Google preempts a spot instance: TERMINATED, then deleted a moment later."""
        with self.lock:
            machine = self.machines[machine_id]
            machine.state = "exited"
        self._operation("compute.instances.preempted", machine.name, done=True, target_id=machine.id)
        threading.Timer(1.0, self.delete, args=(machine_id,)).start()

    def named(self, name: str) -> FakeMachine | None:
        """The live instance called ``name`` or whose id it is (the API takes either)."""
        return next((m for m in self.live() if name in (m.name, m.id)), None)

    # ------------------------------------------------------------------ HTTP

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/oauth2/token"):
            return self._token(body or {})
        if path.startswith("/v1/"):
            return self._billing(method, path.removeprefix("/v1"), query)
        project, _, rest = path.removeprefix("/projects/").partition("/")
        if not path.startswith("/projects/") or project != PROJECT:
            raise _error(403, f"Permission denied on resource project {project}.", "forbidden")
        if rest.startswith("zones/"):
            zone, _, rest = rest.removeprefix("zones/").partition("/")
            if zone != ZONE:
                raise _error(404, f"The resource 'projects/{project}/zones/{zone}' was not found", "notFound")
            return self._zonal(method, rest, query, body)
        if rest.startswith("global/"):
            return self._global(method, rest.removeprefix("global/"), query, body)
        raise self.no_route(method, path)

    def _zonal(self, method: str, rest: str, query: dict[str, str], body: Any) -> Any:
        if (method, rest) == ("GET", "machineTypes"):
            return self._page("compute#machineTypeList", MACHINE_TYPES, query)
        if (method, rest) == ("GET", "acceleratorTypes"):
            return self._page("compute#acceleratorTypeList", ACCELERATOR_TYPES, query)
        if rest == "instances":
            if method == "POST":
                return self._insert(body or {})
            return self._page("compute#instanceList", [self._instance(m) for m in self.live()], query)
        if rest.startswith("instances/"):
            machine = self.named(rest.removeprefix("instances/"))
            if machine is None:
                raise _error(404, f"The resource 'projects/{PROJECT}/zones/{ZONE}/instances/{rest[10:]}' was not found",
                             "notFound")
            if method == "DELETE":
                operation = self._operation("delete", machine.name, target_id=machine.id)
                self.delete(machine.id)
                return operation
            return self._instance(machine)
        if rest.startswith("operations/") and method == "GET":
            return self._read_operation(rest.removeprefix("operations/"))
        raise self.no_route(method, f"zones/{ZONE}/{rest}")

    def _global(self, method: str, rest: str, query: dict[str, str], body: Any) -> Any:
        if rest == "firewalls":
            if method == "POST":
                return self._firewall(body or {})
            return self._page("compute#firewallList", list(self.firewalls.values()), query)
        if rest.startswith("firewalls/") and method == "DELETE":
            name = rest.removeprefix("firewalls/")
            with self.lock:
                if self.firewalls.pop(name, None) is None:
                    raise _error(404, f"The resource 'projects/{PROJECT}/global/firewalls/{name}' was not found",
                                 "notFound")
            return self._operation("delete", name, zone=False)
        if rest.startswith("operations/") and method == "GET":
            return self._read_operation(rest.removeprefix("operations/"))
        raise self.no_route(method, f"global/{rest}")

    def _page(self, kind: str, items: list[Any], query: dict[str, str]) -> dict[str, Any]:
        size = min(int(query.get("maxResults", 500)), 500)
        start = int(query.get("pageToken") or 0)
        page: dict[str, Any] = {"kind": kind, "items": items[start:start + size]}
        if start + size < len(items):
            page["nextPageToken"] = str(start + size)
        return page

    # ------------------------------------------------------------------ the billing catalog

    def _billing(self, method: str, path: str, query: dict[str, str]) -> dict[str, Any]:
        if self.billing_disabled:
            text = (f"Cloud Billing API has not been used in project {PROJECT} before or it is disabled. Enable it by "
                    "visiting https://console.developers.google.com/apis/api/cloudbilling.googleapis.com/overview"
                    f"?project={PROJECT} then retry.")
            raise Answer(403, {"error": {"code": 403, "message": text, "status": "PERMISSION_DENIED", "details": [{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                "domain": "googleapis.com",
                "metadata": {"service": "cloudbilling.googleapis.com", "consumer": f"projects/{PROJECT}"}}]}})
        if (method, path) != ("GET", f"/services/{BILLING_SERVICE}/skus"):
            raise Answer(404, {"error": {"code": 404, "message": f"no route {method} /v1{path}", "status": "NOT_FOUND"}})
        with self.lock:
            self.billing_queries.append(dict(query))
        skus = [sku for sku in billing_skus() if not any(
            sku["description"].removeprefix("Spot Preemptible ").startswith(f"{left} ") for left in self.billing_without)]
        size = min(int(query.get("pageSize") or 5000), 5000, BILLING_PAGE)
        start = int(query.get("pageToken") or 0)
        page: dict[str, Any] = {"skus": skus[start:start + size]}
        if start + size < len(skus):
            page["nextPageToken"] = str(start + size)
        return page

    # ------------------------------------------------------------------ operations

    def _operation(self, kind: str, target: str, *, zone: bool = True, done: bool = False,
                   error: dict[str, Any] | None = None, target_id: str = "") -> dict[str, Any]:
        name = f"operation-{int(time.time() * 1000)}-{next(self._serials)}"
        where = f"projects/{PROJECT}/zones/{ZONE}" if zone else f"projects/{PROJECT}/global"
        operation: dict[str, Any] = {
            "kind": "compute#operation", "id": str(next(self._serials)), "name": name, "operationType": kind,
            "targetLink": f"{self.url}/{where}/{'instances' if zone else 'firewalls'}/{target}",
            "targetId": target_id or str(next(self._serials)),
            "status": "DONE" if done else "PENDING", "progress": 100 if done else 0,
            "selfLink": f"{self.url}/{where}/operations/{name}",
        }
        if zone:
            operation["zone"] = f"{self.url}/projects/{PROJECT}/zones/{ZONE}"
        if error is not None:
            operation.update(error=error, httpErrorStatusCode=503, httpErrorMessage="SERVICE UNAVAILABLE")
        with self.lock:
            self.long_running[name] = operation
        return dict(operation)

    def _read_operation(self, name: str) -> dict[str, Any]:
        with self.lock:
            operation = self.long_running.get(name)
            if operation is None:
                raise _error(404, f"The resource 'operations/{name}' was not found", "notFound")
            if not self.hold_operations:
                operation.update(status="DONE", progress=100)
            else:
                operation["status"] = "RUNNING"
            return dict(operation)

    # ------------------------------------------------------------------ inserts

    def _insert(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name") or "")
        if not NAME.match(name):
            raise _error(400, f"Invalid value for field 'resource.name': '{name}'.", "invalid")
        if self.named(name) is not None:
            raise _error(409, f"The resource 'projects/{PROJECT}/zones/{ZONE}/instances/{name}' already exists",
                         "alreadyExists")
        kind_name = str(body.get("machineType") or "").rsplit("/", 1)[-1]
        kind = next((t for t in MACHINE_TYPES if t["name"] == kind_name), None)
        if kind is None or not str(body["machineType"]).endswith(f"zones/{ZONE}/machineTypes/{kind_name}"):
            raise _error(400, f"Invalid value for field 'resource.machineType': '{body.get('machineType')}'.", "invalid")
        labels = body.get("labels") or {}
        for key, value in labels.items():
            if not LABEL_KEY.match(key) or not isinstance(value, str) or not LABEL_VALUE.match(value):
                raise _error(400, f"Invalid value for field 'resource.labels': '{key}={value}'.", "invalid")
        scheduling = body.get("scheduling") or {}
        gpus = body.get("guestAccelerators") or []
        for gpu in gpus:
            gpu_name = str(gpu.get("acceleratorType") or "").rsplit("/", 1)[-1]
            listed = next((a for a in ACCELERATOR_TYPES if a["name"] == gpu_name), None)
            if listed is None or not kind_name.startswith("n1-") or gpu_name not in N1_GPUS:
                raise _error(400, f"Accelerator type {gpu_name} cannot be attached to {kind_name}.", "invalid")
            if not 0 < int(gpu.get("acceleratorCount") or 0) <= listed["maximumCardsPerInstance"]:
                raise _error(400, "Invalid value for field 'resource.guestAccelerators[0].acceleratorCount'.", "invalid")
        if (gpus or kind.get("accelerators")) and scheduling.get("onHostMaintenance") != "TERMINATE":
            raise _error(400, "Instances with guest accelerators do not support live migration.", "invalid")
        if scheduling.get("provisioningModel") == "SPOT" and (
            scheduling.get("automaticRestart") or scheduling.get("instanceTerminationAction") not in ("STOP", "DELETE")
        ):
            raise _error(400, "Spot VMs need automaticRestart false and an instanceTerminationAction.", "invalid")
        disks = body.get("disks") or []
        if len(disks) != 1 or not disks[0].get("boot") or not (disks[0].get("initializeParams") or {}).get("sourceImage"):
            raise _error(400, "Invalid value for field 'resource.disks': one boot disk with a sourceImage.", "invalid")
        interfaces = body.get("networkInterfaces") or []
        if len(interfaces) != 1 or str(interfaces[0].get("network", "")).rsplit("/", 1)[-1] not in NETWORKS:
            raise _error(400, "Invalid value for field 'resource.networkInterfaces[0].network'.", "invalid")
        metadata = {item["key"]: item["value"] for item in (body.get("metadata") or {}).get("items") or []}
        user, _, key = str(metadata.get("ssh-keys", "")).partition(":")
        if user != "root" or not key.startswith("ssh-"):
            raise _error(400, "ssh-keys metadata must be 'user:key'.", "invalid")
        if kind_name in self.refused or "*" in self.refused:
            code = "ZONE_RESOURCE_POOL_EXHAUSTED"
            text = f"The zone 'projects/{PROJECT}/zones/{ZONE}' does not have enough resources available to fulfill the request."
            return self._operation("insert", name, done=True, error={"errors": [{"code": code, "message": text}]})
        price = 0.0
        machine = self.add(name, kind_name, scheduling.get("provisioningModel") == "SPOT",
                 str(disks[0]["initializeParams"]["sourceImage"]), key, price, region=ZONE, labels=dict(labels),
                 body=body, tags=list((body.get("tags") or {}).get("items") or []))
        return self._operation("insert", name, target_id=machine.id)

    def _firewall(self, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name") or "")
        if not NAME.match(name) or name in self.firewalls:
            raise _error(409 if name in self.firewalls else 400, f"Invalid or existing firewall name '{name}'.", "invalid")
        if str(body.get("network", "")).rsplit("/", 1)[-1] not in NETWORKS or not body.get("allowed"):
            raise _error(400, "Invalid value for field 'resource.network' or 'resource.allowed'.", "invalid")
        if not body.get("sourceRanges") and not body.get("sourceTags"):
            raise _error(400, "A firewall rule needs sourceRanges or sourceTags.", "invalid")
        rule = {"kind": "compute#firewall", "id": self.new_id(), "creationTimestamp": _stamp(time.time()),
                **body, "direction": body.get("direction", "INGRESS"), "priority": body.get("priority", 1000)}
        with self.lock:
            self.firewalls[name] = rule
        return self._operation("insert", name, zone=False)

    def _instance(self, machine: FakeMachine) -> dict[str, Any]:
        body = machine.extra.get("body") or {}
        running = machine.state == "running"
        access: dict[str, Any] = {"type": "ONE_TO_ONE_NAT", "name": "External NAT", "networkTier": "PREMIUM"}
        if running:
            access["natIP"] = machine.address
        return {
            "kind": "compute#instance", "id": machine.id, "name": machine.name,
            "creationTimestamp": _stamp(machine.created), "status": STATUS.get(machine.state, "TERMINATED"),
            "zone": f"{self.url}/projects/{PROJECT}/zones/{ZONE}",
            "machineType": f"{self.url}/projects/{PROJECT}/zones/{ZONE}/machineTypes/{machine.kind}",
            "labels": machine.extra.get("labels", {}), "tags": {"items": machine.extra.get("tags", [])},
            "networkInterfaces": [{"network": f"{self.url}/projects/{PROJECT}/global/networks/default",
                                   "networkIP": machine.address, "name": "nic0", "accessConfigs": [access]}],
            "scheduling": body.get("scheduling") or {"provisioningModel": "STANDARD"},
            "metadata": body.get("metadata") or {}, "guestAccelerators": body.get("guestAccelerators") or [],
        }
