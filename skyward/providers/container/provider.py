"""``sky.Container(...)``: each node a container of the local Docker or Podman engine,
driven through the Docker Engine API on its Unix socket (``engine.py``, ``api.py``).

It is a machine cloud whose machines are containers (``MachineCloud``): each pool gets a
bridge network of its own, then one container per node from ``container_image`` (default
``python:<client's version>-slim``) that runs sshd with the pool's fresh key on port 22,
published on 127.0.0.1; the shared SSH path brings the nodes up as on any cloud.
Closing removes the containers (confirmed gone), then the network. What a lost pool left
carries the label ``skyward.pool`` and its name, so ``sky gc --provider container`` finds
it. See docs/providers.md."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import ClassVar

from skyward.containers import DockerImage, image_field
from skyward.core.validation import fail
from skyward.image.image import local_python
from skyward.model.spec import Options, Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.container.api import ContainerAPI
from skyward.providers.container.engine import find_socket
from skyward.providers.ssh.connection import BOOTING_SSH_TIMEOUT

DEADLINE_FILE = "/run/skyward-deadline"


@dataclass(frozen=True, slots=True)
class Container(MachineCloud):
    """Nodes in local containers. ``container_image``: a ``sky.containers`` image or tag with Python at
    the client's version (sshd is installed at start through apt-get or apk when the image
    lacks it); ``socket``: the engine's Unix socket (None: ``DOCKER_HOST``,
    ``CONTAINER_HOST``, then Docker's and Podman's usual sockets)."""

    name: ClassVar[str] = "container"
    label: ClassVar[str] = "Container"
    priced: ClassVar[bool] = False
    spot_market: ClassVar[bool] = False

    container_image: DockerImage | str | None = None
    """A string is read as an image reference (a DockerImage once made)."""
    socket: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "container_image", image_field("Container", "container_image", self.container_image))
        if self.socket is not None and not (isinstance(self.socket, str) and self.socket.strip()):
            raise fail("Container", "socket", self.socket, "give the engine's socket path, e.g. /var/run/docker.sock")

    def api(self) -> ContainerAPI:
        return ContainerAPI(find_socket(self.socket))

    def image(self, spec: Spec) -> str:
        chosen = self.container_image
        return chosen.tag if isinstance(chosen, DockerImage) else f"python:{local_python()}-slim"

    def refuse(self, spec: Spec) -> None:
        if spec.region is not None:
            raise fail("Spec", "region", spec.region, "sky.Container runs on this machine's engine; leave region unset")
        if spec.accelerator is not None:
            raise fail(
                "Spec", "accelerator", spec.accelerator,
                "sky.Container does not pass GPUs into its containers; use sky.Local() for this machine's GPUs",
            )
        if spec.disk_gb is not None:
            raise fail("Spec", "disk_gb", spec.disk_gb, "containers share the engine's disk; leave disk_gb unset")

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The container's command: sshd with the pool's key (installed first when the
        image lacks it), a ``shutdown`` that stops the container for the watchdog, and a
        deadline that stops it when no client takes it over."""
        budget = float(options.bootstrap_timeout or spec.image.bootstrap_timeout) + BOOTING_SSH_TIMEOUT + spec.ttl + 600
        return BOOT.format(deadline=math.ceil(budget), file=shlex.quote(DEADLINE_FILE))


BOOT = """set -e
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends openssh-server >/dev/null
  elif command -v apk >/dev/null 2>&1; then
    apk add --no-cache openssh-server >/dev/null
  else
    echo "skyward: this image has no sshd and neither apt-get nor apk to install it" >&2; exit 1
  fi
fi
mkdir -p /root/.ssh /run/sshd /usr/local/sbin && chmod 700 /root/.ssh
printf '%s\\n' "$SKYWARD_PUBLIC_KEY" > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
ssh-keygen -A >/dev/null
printf '#!/bin/sh\\ncase "$1" in -c) rm -f {file} ;; *) kill -TERM 1 ;; esac\\n' > /usr/local/sbin/shutdown
chmod 755 /usr/local/sbin/shutdown
touch {file}
(sleep {deadline}; if [ -e {file} ]; then kill -TERM 1; fi) &
exec "$(command -v sshd || echo /usr/sbin/sshd)" -D -e -o PasswordAuthentication=no -o PermitRootLogin=prohibit-password
"""
"""Run by /bin/sh as the container's command (under the engine's init, PID 1)."""
