"""A local Docker engine: the Docker Engine API (``/v1.41``: ``/_ping``, ``/info``,
images, networks, containers) on a Unix socket, in the shapes Docker documents. Its
"containers" are test hosts (``Harness``): a started container boots as a host at an
address of the lab's subnet, trusting the key in its ``SKYWARD_PUBLIC_KEY``, and its
published port 22 is a forward from 127.0.0.1 to that host's sshd. The command a
container is created with is recorded, never run. Only images ``pull``ed (or in
``images``) exist; ``POST /images/create`` pulls any image unless ``unreachable`` is set
(a registry that cannot be reached), answering with the last line of the engine's
progress stream. A network or container made is answered 201, as Docker documents. A request with a query parameter or a body field these operations do not
declare, or a ``filters`` key other than ``label``, is refused (400, naming it)."""

from __future__ import annotations

import datetime
import json
import os
import socketserver
import tempfile
import threading
from typing import Any

from cloud.fake_cloud import Answer, FakeCloud, FakeMachine, Operation, _Handler, keyed, shape
from cloud.forward import Forward

PORT = "22/tcp"
HOST_CONFIG = shape(
    "Binds", "ContainerIDFile", "LogConfig", "NetworkMode", "RestartPolicy", "AutoRemove", "VolumeDriver",
    "VolumesFrom", "Mounts", "ConsoleSize", "Annotations", "CapAdd", "CapDrop", "CgroupnsMode", "Dns", "DnsOptions",
    "DnsSearch", "ExtraHosts", "GroupAdd", "IpcMode", "Cgroup", "Links", "OomScoreAdj", "PidMode", "Privileged",
    "PublishAllPorts", "ReadonlyRootfs", "SecurityOpt", "StorageOpt", "Tmpfs", "UTSMode", "UsernsMode", "ShmSize",
    "Sysctls", "Runtime", "Isolation", "MaskedPaths", "ReadonlyPaths", "CpuShares", "Memory", "CgroupParent",
    "NanoCpus", "CpuPeriod", "CpuQuota", "CpusetCpus", "CpusetMems", "Devices", "DeviceRequests", "Init",
    "PidsLimit", "Ulimits", "MemoryReservation", "MemorySwap", "OomKillDisable",
    PortBindings=keyed(shape("HostIp", "HostPort")),
)
OPERATIONS = (
    Operation("GET", "/_ping"),
    Operation("GET", "/info"),
    Operation("POST", "/images/create", ("fromImage",)),
    Operation("GET", "/images/{name+}/json"),
    Operation("GET", "/networks", ("filters",)),
    Operation("POST", "/networks/create", body=shape(
        "Name", "CheckDuplicate", "Driver", "Scope", "Internal", "Attachable", "Ingress", "ConfigOnly", "ConfigFrom",
        "IPAM", "EnableIPv4", "EnableIPv6", "Options", "Labels",
    )),
    Operation("GET", "/networks/{id}"),
    Operation("DELETE", "/networks/{id}"),
    Operation("GET", "/containers/json", ("all", "filters")),
    Operation("POST", "/containers/create", ("name",), body=shape(
        "Hostname", "Domainname", "User", "AttachStdin", "AttachStdout", "AttachStderr", "ExposedPorts", "Tty",
        "OpenStdin", "StdinOnce", "Env", "Cmd", "Healthcheck", "ArgsEscaped", "Image", "Volumes", "WorkingDir",
        "Entrypoint", "NetworkDisabled", "MacAddress", "OnBuild", "Labels", "StopSignal", "StopTimeout", "Shell",
        "NetworkingConfig", HostConfig=HOST_CONFIG,
    )),
    Operation("POST", "/containers/{id}/start"),
    Operation("GET", "/containers/{id}/json"),
    Operation("GET", "/containers/{id}/logs", ("stdout", "stderr", "tail")),
    Operation("DELETE", "/containers/{id}", ("force",)),
)
"""The operations of the Docker Engine API the fake serves, with the fields Docker documents."""
CREATED = {("POST", "/networks/create"), ("POST", "/containers/create")}
"""What Docker answers 201 Created."""


class FakeDocker(FakeCloud):
    name = "docker"
    prefix = "/v1.41"
    operations = OPERATIONS
    pinned = "docker"

    def __init__(self) -> None:
        super().__init__()
        self.images: set[str] = set()
        self.unreachable = False
        self.crash: str | None = None
        """When set, a started container exits at once with code 1, having written this."""
        self.forwards: dict[str, Forward] = {}
        self._directory = tempfile.mkdtemp(prefix="fake-docker-")
        os.chmod(self._directory, 0o700)
        self.socket = os.path.join(self._directory, "docker.sock")
        self._unix: socketserver.ThreadingUnixStreamServer | None = None

    def start(self) -> FakeDocker:
        fake = self

        class Handler(_Handler):
            owner = fake

            def address_string(self) -> str:
                return "unix"

        self._unix = socketserver.ThreadingUnixStreamServer(self.socket, Handler)
        self._unix.daemon_threads = True
        threading.Thread(target=self._unix.serve_forever, name="fake-docker", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._unix is not None:
            self._unix.shutdown()
            self._unix.server_close()
        for forward in self.forwards.values():
            forward.close()
        os.unlink(self.socket)
        os.rmdir(self._directory)

    @property
    def url(self) -> str:
        return f"http://engine{self.prefix}"

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}"}

    def authorized(self, headers: Any) -> bool:
        return True  # the socket's file mode is the engine's only lock

    def success(self, method: str, path: str) -> int:
        return 201 if (method, path) in CREATED else 200

    def error(self, status: int, text: str) -> Answer:
        return Answer(status, {"message": text})

    # ------------------------------------------------------------------ MachineSource

    def started(self, machine_id: str) -> None:
        super().started(machine_id)
        machine = self.machines[machine_id]
        with self.lock:
            if machine.state == "running" and machine_id not in self.forwards:
                self.forwards[machine_id] = Forward((machine.address or "", 22))

    def delete(self, machine_id: str) -> bool:
        gone = super().delete(machine_id)
        forward = self.forwards.pop(machine_id, None)
        if forward is not None:
            forward.close()
        return gone

    def halt(self, machine_id: str) -> None:
        super().halt(machine_id)
        forward = self.forwards.pop(machine_id, None)
        if forward is not None:
            forward.close()

    def plant(
        self, name: str, kind: str = "container", price: float = 0.0, tags: tuple[str, ...] = (), group: str = ""
    ) -> FakeMachine:
        """A running labelled container without a host (what a lost pool left)."""
        machine = super().plant(name, kind, price, tags)
        machine.extra.update(labels={"skyward.pool": group or name.rsplit("-", 1)[0]}, network=group)
        return machine

    # ------------------------------------------------------------------ HTTP

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("GET", "/_ping"):
            return "OK"
        if (method, path) == ("GET", "/info"):
            return {"NCPU": os.cpu_count() or 1, "MemTotal": 16 * 2**30, "Architecture": os.uname().machine,
                    "OperatingSystem": "fake engine", "ServerVersion": "fake"}
        if path.startswith("/images"):
            return self._image(method, path, query)
        if path.startswith("/networks"):
            return self._network(method, path, query, body)
        if path.startswith("/containers"):
            return self._container(method, path, query, body)
        raise self.no_route(method, path)

    def _image(self, method: str, path: str, query: dict[str, str]) -> Any:
        if (method, path) == ("POST", "/images/create"):
            image = query["fromImage"]
            if self.unreachable:  # the engine answers 200 and ends its progress stream with the error
                return {"errorDetail": {"message": "registry unreachable"},
                        "error": f"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup failed ({image})"}
            self.images.add(image)
            return {"status": f"Status: Downloaded newer image for {image}"}
        image = path.removeprefix("/images/").removesuffix("/json")
        if method == "GET" and image in self.images:
            return {"Id": f"sha256:{abs(hash(image)):064x}"[:71], "RepoTags": [image]}
        raise Answer(404, {"message": f"No such image: {image}"})

    def _network(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/networks/create"):
            if any(n["Name"] == body["Name"] for n in self.firewalls.values()):
                raise Answer(409, {"message": f"network with name {body['Name']} already exists"})
            network = {"Id": self.new_id(), "Name": body["Name"], "Driver": body.get("Driver", "bridge"),
                       "Labels": body.get("Labels") or {}}
            self.firewalls[network["Id"]] = network
            return {"Id": network["Id"], "Warning": ""}
        if (method, path) == ("GET", "/networks"):
            wanted = _labels_wanted(query)
            return [n for n in self.firewalls.values() if _matches(n["Labels"], wanted)]
        found = self._find_network(path.removeprefix("/networks/"))
        if method == "DELETE":
            if any(m.extra.get("network") == found["Name"] for m in self.live()):
                raise Answer(403, {"message": f"error while removing network: {found['Name']} has active endpoints"})
            del self.firewalls[found["Id"]]
            return None
        return found

    def _container(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        if (method, path) == ("POST", "/containers/create"):
            return self._create(query.get("name", ""), body)
        if (method, path) == ("GET", "/containers/json"):
            shown = [m for m in self.live() if query.get("all") == "true" or m.state == "running"]
            wanted = _labels_wanted(query)
            return [self._listed(m) for m in shown if _matches(m.extra.get("labels") or {}, wanted)]
        reference, _, action = path.removeprefix("/containers/").partition("/")
        machine = self._find(reference)
        if (method, action) == ("POST", "start"):
            if machine.state == "created" and self.crash is not None:
                machine.state = "exited"
                machine.extra.update(exit=1, output=self.crash)
            elif machine.state == "created":
                machine.state = "booting"
            return None
        if (method, action) == ("GET", "logs"):
            lines = machine.extra.get("output", "").splitlines() if query.get("stderr") == "true" else []
            tail = query.get("tail", "all")
            return _frames(lines if tail == "all" else lines[max(len(lines) - int(tail), 0):])
        if (method, action) == ("GET", "json"):
            return self._inspected(machine)
        if (method, action) == ("DELETE", ""):
            if machine.state == "running" and query.get("force") != "true":
                raise Answer(409, {"message": "cannot remove a running container: stop it or use force"})
            self.delete(machine.id)
            return None
        raise self.no_route(method, path)

    def _create(self, name: str, body: dict[str, Any]) -> Any:
        image = body.get("Image")
        if image not in self.images:
            raise Answer(404, {"message": f"No such image: {image}"})
        if any(m.name == name for m in self.live()):
            raise Answer(409, {"message": f"Conflict. The container name \"/{name}\" is already in use"})
        host = body.get("HostConfig") or {}
        network = host.get("NetworkMode", "bridge")
        if not any(n["Name"] == network for n in self.firewalls.values()):
            raise Answer(404, {"message": f"network {network} not found"})
        key = next((e.split("=", 1)[1] for e in body.get("Env") or [] if e.startswith("SKYWARD_PUBLIC_KEY=")), "")
        machine = self.add(name, "container", False, image, key, 0.0, labels=body.get("Labels") or {},
                           network=network, command=body.get("Cmd"), host_config=host)
        machine.state = "created"
        return {"Id": machine.id, "Warnings": []}

    def _find(self, reference: str) -> FakeMachine:
        machine = self.machines.get(reference) or next((m for m in self.live() if m.name == reference), None)
        if machine is None or machine.state == "deleted":
            raise Answer(404, {"message": f"No such container: {reference}"})
        return machine

    def _find_network(self, reference: str) -> dict[str, Any]:
        for network in self.firewalls.values():
            if reference in (network["Id"], network["Name"]):
                return network
        raise Answer(404, {"message": f"network {reference} not found"})

    def _status(self, machine: FakeMachine) -> str:
        return {"booting": "running", "running": "running", "exited": "exited"}.get(machine.state, machine.state)

    def _ports(self, machine: FakeMachine) -> list[dict[str, Any]]:
        forward = self.forwards.get(machine.id)
        return [{"HostIp": "127.0.0.1", "HostPort": str(forward.port)}] if forward is not None else []

    def _networks(self, machine: FakeMachine) -> dict[str, Any]:
        if machine.state not in ("booting", "running"):
            return {}
        return {machine.extra.get("network", "bridge"): {"IPAddress": machine.address, "IPPrefixLen": 24}}

    def _inspected(self, machine: FakeMachine) -> dict[str, Any]:
        status = self._status(machine)
        created = datetime.datetime.fromtimestamp(machine.created, datetime.UTC)
        return {
            "Id": machine.id, "Name": f"/{machine.name}", "Created": created.strftime("%Y-%m-%dT%H:%M:%S.%f123Z"),
            "State": {"Status": status, "Running": status == "running", "ExitCode": machine.extra.get("exit", 0)},
            "Config": {"Image": machine.image, "Labels": machine.extra.get("labels") or {}},
            "NetworkSettings": {"Ports": {PORT: self._ports(machine) or None}, "Networks": self._networks(machine)},
        }

    def _listed(self, machine: FakeMachine) -> dict[str, Any]:
        ports = [{"IP": p["HostIp"], "PrivatePort": 22, "PublicPort": int(p["HostPort"]), "Type": "tcp"}
                 for p in self._ports(machine)]
        return {
            "Id": machine.id, "Names": [f"/{machine.name}"], "Image": machine.image, "State": self._status(machine),
            "Created": int(machine.created), "Labels": machine.extra.get("labels") or {}, "Ports": ports,
            "NetworkSettings": {"Networks": self._networks(machine)},
        }


def _frames(lines: list[str]) -> bytes:
    """``lines`` as a log stream without a TTY: a frame per line, each on stderr (2) with its
    8-byte header (stream, three zeros, big-endian size)."""
    encoded = [line.encode() + b"\n" for line in lines]
    return b"".join(bytes([2, 0, 0, 0]) + len(line).to_bytes(4, "big") + line for line in encoded)


def _labels_wanted(query: dict[str, str]) -> list[str]:
    """The ``filters`` query's ``label`` filters (key or key=value); Answer 400 for a filter
    of another kind (the fake filters by label only)."""
    filters = json.loads(query.get("filters") or "{}")
    other = sorted(set(filters) - {"label"})
    if other:
        raise Answer(400, {"message": f"invalid filter '{other[0]}' (the fake filters by label only)"})
    return list(filters.get("label") or [])


def _matches(labels: dict[str, str], wanted: list[str]) -> bool:
    """Whether ``labels`` pass every filter of ``wanted``."""
    return all(labels.get(w.split("=", 1)[0]) == w.split("=", 1)[1] if "=" in w else w in labels for w in wanted)
