"""Where the local container engine listens: ``Container(socket=...)``, else ``DOCKER_HOST``
or ``CONTAINER_HOST`` (``unix://`` only), else the first of the usual sockets of Docker
and Podman (rootless, then rootful) that exists. Docker and Podman both serve the Docker
Engine API there; the socket's file permissions are its only lock, so nothing else is
ever dialled."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from skyward.providers.cloud.errors import CloudError

ENVIRONMENT = ("DOCKER_HOST", "CONTAINER_HOST")
LOCAL_HINT = "start Docker or Podman (e.g. `systemctl --user start podman.socket`), or run the nodes as local processes with sky.Local()"


class EngineError(CloudError):
    """No container engine answers here; the message says where it looked and names
    ``sky.Local()``."""


def usual_sockets() -> list[str]:
    """Docker's and Podman's default sockets for this user, most specific first."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return [
        f"{runtime}/podman/podman.sock", f"{runtime}/docker.sock", str(Path.home() / ".docker/run/docker.sock"),
        "/var/run/docker.sock", "/run/podman/podman.sock",
    ]


def find_socket(explicit: str | None = None) -> str:
    """The engine's socket path. EngineError when the one given (or named by the
    environment) is not a socket, or when none of the usual ones exists."""
    for origin, value in [("Container.socket", explicit), *((name, os.environ.get(name)) for name in ENVIRONMENT)]:
        if value:
            path = _unix_path(origin, value)
            if not _is_socket(path):
                raise EngineError(f"{origin}={value!r} is not a listening engine socket (no socket at {path}); {LOCAL_HINT}")
            return path
    for path in usual_sockets():
        if _is_socket(path):
            return path
    looked = ", ".join([*ENVIRONMENT, *usual_sockets()])
    raise EngineError(f"no Docker or Podman engine is running on this machine (looked at {looked}); {LOCAL_HINT}")


def _unix_path(origin: str, value: str) -> str:
    if value.startswith("unix://"):
        return value.removeprefix("unix://")
    if value.startswith("/"):
        return value
    raise EngineError(
        f"{origin}={value!r}: sky.Container reaches the engine through a Unix socket on this machine only "
        "(unix:///path/to/docker.sock): the nodes' SSH ports are published on the engine machine's 127.0.0.1"
    )


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
