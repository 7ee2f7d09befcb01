"""The Docker Engine API (``/v1.41``, which Docker and Podman both serve) as the machine
clouds' ``MachineAPI``: a machine is a container, the pool's "firewall" its own bridge
network (only the pool's containers are on it). ``GET /info`` is the one machine type
(the engine's CPUs and memory, free); ``create`` pulls the image when the engine lacks
it (``POST /images/create``), then ``POST /containers/create`` and ``/start`` with the
pool's key in ``SKYWARD_PUBLIC_KEY``, the boot script as the command, port 22 published
on 127.0.0.1 and the label ``skyward.pool``, by which ``machines``/``firewalls`` list
what pools left; ``delete`` is ``DELETE /containers/{id}?force=true``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import httpx

from skyward.providers.cloud import fields
from skyward.providers.cloud.api import Firewall, Machine, MachineState, MachineType, Order, epoch
from skyward.providers.cloud.errors import CloudAPIError, CloudError
from skyward.providers.cloud.fields import JsonObject
from skyward.providers.cloud.http import ApiClient, message
from skyward.providers.cloud.keys import KeysInOrders
from skyward.providers.container.engine import LOCAL_HINT, EngineError

API = "http://engine/v1.41"
LABEL = "skyward.pool"
"""Every container and network a pool creates carries it; its value is the pool's group name."""
SSH_PORT = "22/tcp"
KIND = "container"
LOG_LINES = 20
FRAME_HEADER = re.compile(r"[\x00-\x02]\x00\x00\x00[\s\S]{4}")
"""The 8-byte header of each frame of a log stream without a TTY (stream, 0, 0, 0, size)."""
STATES: dict[str, MachineState] = {
    "created": "starting", "restarting": "starting", "paused": "starting", "running": "running",
    "exited": "stopped", "dead": "stopped", "removing": "ended",
}


class ContainerFailed(CloudError):
    """A container stopped before it was ever reachable: its command failed (the message
    has its exit code and its last output)."""


class ContainerAPI(KeysInOrders):
    """Calls the engine at ``socket``. EngineError when it does not answer there."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self._http = ApiClient(
            "container engine", API, dict, f"that this user may use {socket}", attempts=2,
            transport=httpx.HTTPTransport(uds=socket),
        )
        self._images: set[str] = set()
        self._starting: set[str] = set()
        """Containers started here and not yet seen reachable."""
        try:
            self._http.call("GET", "/_ping", "checking that the engine answers")
        except CloudError as exc:
            raise EngineError(f"the container engine at {socket} does not answer ({exc}); {LOCAL_HINT}") from None

    def machine_types(self, region: str | None) -> list[MachineType]:
        info = fields.as_object(self._http.call("GET", "/info", "reading the engine's CPUs and memory"))
        architecture = fields.text(info, "Architecture", "x86_64")
        return [MachineType(
            KIND, fields.number(info, "NCPU", 1), fields.number(info, "MemTotal", 0) / 2**30, 0.0,
            architecture={"aarch64": "arm64", "amd64": "x86_64"}.get(architecture, architecture),
        )]

    def add_firewall(self, group: str) -> str:
        body = {"Name": group, "Driver": "bridge", "CheckDuplicate": True, "Labels": {LABEL: group}}
        made = self._http.call("POST", "/networks/create", f"creating network {group}", json=body)
        return fields.text(fields.as_object(made), "Id")

    def remove_firewall(self, firewall_id: str, group: str) -> None:
        self._http.remove(f"/networks/{firewall_id}", f"removing network {group}")

    def firewalls(self) -> list[Firewall]:
        found = fields.as_objects(self._http.call("GET", "/networks", "listing networks", params=_labelled()))
        ours = [n for n in found if LABEL in fields.obj(n, "Labels")]
        return [Firewall(fields.text(n, "Id"), fields.text(n, "Name", "")) for n in ours]

    def create(self, order: Order) -> str:
        self._ensure_image(order.image)
        body: dict[str, object] = {
            "Image": order.image, "Cmd": ["/bin/sh", "-c", order.user_data],
            "Env": [f"SKYWARD_PUBLIC_KEY={order.public_key}"], "Labels": {LABEL: order.group},
            "ExposedPorts": {SSH_PORT: {}},
            "HostConfig": {
                "NetworkMode": order.group, "Init": True,
                "PortBindings": {SSH_PORT: [{"HostIp": "127.0.0.1", "HostPort": ""}]},
            },
        }
        made = self._http.call(
            "POST", "/containers/create", f"creating container {order.name}", json=body, params={"name": order.name},
        )
        container = fields.text(fields.as_object(made), "Id")
        try:
            self._http.call("POST", f"/containers/{container}/start", f"starting container {order.name}")
        except CloudError:
            self.delete(container)
            raise
        self._starting.add(container)
        return container

    def get(self, machine_id: str) -> Machine | None:
        """The container, or None once removed. ContainerFailed when one started here
        stopped before it was ever reachable."""
        try:
            found = fields.as_object(
                self._http.call("GET", f"/containers/{machine_id}/json", f"reading container {machine_id}")
            )
        except CloudAPIError as exc:
            if exc.status == 404:
                return None
            raise
        machine = _inspected(found)
        if machine.state == "running":
            self._starting.discard(machine_id)
        elif machine.state == "stopped" and machine_id in self._starting:
            self._starting.discard(machine_id)
            code = fields.obj(found, "State").get("ExitCode")
            raise ContainerFailed(
                f"container {machine.name} exited with code {code} before sshd was reachable; its last output: "
                f"{self._output(machine_id)!r}. Its image needs /bin/sh and sshd, or apt-get or apk and a "
                "reachable package mirror to install it (see docs/providers.md, sky.Container)"
            )
        return machine

    def machines(self) -> list[Machine]:
        found = self._http.call("GET", "/containers/json", "listing containers", params={"all": "true", **_labelled()})
        return [_listed(item) for item in fields.as_objects(found)]

    def delete(self, machine_id: str) -> None:
        self._http.remove(f"/containers/{machine_id}", f"removing container {machine_id}", params={"force": "true"})

    def _output(self, machine_id: str) -> str:
        """The last lines the container wrote (empty when they cannot be read)."""
        try:
            raw = self._http.call(
                "GET", f"/containers/{machine_id}/logs", f"reading the output of container {machine_id}",
                params={"stdout": "true", "stderr": "true", "tail": str(LOG_LINES)},
            )
        except CloudError:
            return ""
        return FRAME_HEADER.sub("", str(raw or "")).strip()

    def _ensure_image(self, image: str) -> None:
        """Pull ``image`` unless the engine has it (once per API object)."""
        if image in self._images:
            return
        try:
            self._http.call("GET", f"/images/{image}/json", f"looking for image {image}")
        except CloudAPIError as exc:
            if exc.status != 404:
                raise
            answer = self._http.call("POST", "/images/create", f"pulling image {image}", params={"fromImage": image})
            failed = _pull_error(answer)
            if failed:
                raise CloudError(
                    f"the container engine could not pull {image}: {failed}; pull it yourself "
                    "(docker pull / podman pull) or give Container(image=...) an image it has"
                ) from None
        self._images.add(image)


def _labelled() -> dict[str, str]:
    return {"filters": json.dumps({"label": [LABEL]})}


def _pull_error(answer: object) -> str | None:
    """The error a pull's progress stream (JSON lines) ends with, if any."""
    if isinstance(answer, Mapping):
        return message(answer) if answer.get("error") else None
    for line in str(answer or "").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("error"):
            return message(item)
    return None


def _inspected(found: JsonObject) -> Machine:
    """A container as ``GET /containers/{id}/json`` shows it."""
    status = fields.text(fields.obj(found, "State"), "Status", "")
    settings = fields.obj(found, "NetworkSettings")
    port = _published(fields.objects(fields.obj(settings, "Ports"), SSH_PORT))
    address = _address(fields.obj(settings, "Networks"))
    created = epoch(found.get("Created"))
    return _machine(fields.text(found, "Id"), fields.text(found, "Name", ""), status, port, address, created)


def _listed(item: JsonObject) -> Machine:
    """A container as ``GET /containers/json`` lists it."""
    ports = [p for p in fields.objects(item, "Ports") if p.get("PrivatePort") == 22 and p.get("PublicPort")]
    port = fields.integer(ports[0], "PublicPort") if ports else None
    address = _address(fields.obj(fields.obj(item, "NetworkSettings"), "Networks"))
    name = fields.to_text((fields.items(item, "Names") or [""])[0], "Names")
    created = fields.number(item, "Created", 0) or None
    return _machine(fields.text(item, "Id"), name, fields.text(item, "State", ""), port, address, created)


def _machine(container: str, name: str, status: str, port: int | None, address: str | None, created: float | None) -> Machine:
    """``status`` in any case: the Engine API's own example of a listing says ``Exited``."""
    state = STATES.get(status.lower(), "starting")
    if state == "running" and (port is None or address is None):
        state = "starting"
    return Machine(
        str(container), name.lstrip("/"), state, "127.0.0.1" if port else None, port or 22, address, 0.0,
        machine_type=KIND, created=created,
    )


def _published(bindings: list[JsonObject]) -> int | None:
    ports = [int(port) for port in (fields.text(b, "HostPort", "") for b in bindings) if port.isdigit()]
    return ports[0] if ports else None


def _address(networks: JsonObject) -> str | None:
    found = (fields.as_object(n, "a network") for n in networks.values())
    addresses = [fields.text(n, "IPAddress") for n in found if n.get("IPAddress")]
    return addresses[0] if addresses else None
