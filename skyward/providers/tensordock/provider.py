"""``sky.TensorDock(region=None)``: GPU virtual machines on TensorDock's marketplace.

Offers are the GPUs of TensorDock's locations (``GET /locations``), priced live from what
each location publishes (per GPU, per vCPU, per GB of memory and of disk). Each node is
one VM created by location with the pool's public key, its port 22 forwarded from a port
of the host's public address (the only port forwarded), and a cloud-init that lets the
key log in as root and runs skyward's boot script. No spot market; no firewall resource.
Closing deletes the VMs (confirmed). See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import fail
from skyward.model.spec import Options, Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.tensordock.api import TensorDockAPI

DEFAULT_IMAGE = "ubuntu2404_ml_everything"
SHEBANG = "#!/bin/bash\n"
ROOT_LOGIN = (
    "install -d -m 700 /root/.ssh && "
    "install -m 600 /home/user/.ssh/authorized_keys /root/.ssh/authorized_keys || true\n"
)
"""TensorDock's images give the order's key to ``user``; skyward logs in as root."""


@dataclass(frozen=True, slots=True)
class TensorDock(MachineCloud):
    """TensorDock VMs. ``region``: part of a location's "City, State, Country" to keep
    ("United States", "Texas"), or a location id (None: anywhere); ``image_name``: a TensorDock
    OS image id ("ubuntu2404"; default: the one with NVIDIA drivers and CUDA);
    ``api_token``: the API token (None: ``$TENSORDOCK_API_TOKEN``)."""

    name: ClassVar[str] = "tensordock"
    label: ClassVar[str] = "TensorDock"
    spot_market: ClassVar[bool] = False

    region: str | None = None
    image_name: str = DEFAULT_IMAGE
    api_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("TensorDock", "image_name", self.image_name)
        if not isinstance(self.image_name, str) or not self.image_name.strip():
            raise fail(
                "TensorDock",
                "image_name",
                self.image_name,
                'give a TensorDock image id such as "ubuntu2404", '
                f'or leave it out for "{DEFAULT_IMAGE}"',
            )
        if self.region is not None and (
            not isinstance(self.region, str) or not self.region.strip()
        ):
            raise fail(
                "TensorDock",
                "region",
                self.region,
                'give part of a location ("United States", "Texas") or a location id, '
                "or None for anywhere",
            )
        if self.api_token is not None and (
            not isinstance(self.api_token, str) or not self.api_token.strip()
        ):
            raise ValueError(
                f"TensorDock.api_token of type {type(self.api_token).__name__} is not valid: "
                "give the API token as a non-empty str, or leave it out to read "
                "$TENSORDOCK_API_TOKEN"
            )

    def api(self) -> TensorDockAPI:
        return TensorDockAPI(self.api_token.strip() if self.api_token else None)

    def image(self, spec: Spec) -> str:
        return self.image_name.strip()

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The shared boot script, after a step that lets the order's key log in as root."""
        shared = MachineCloud.boot_script(self, spec, options)
        return SHEBANG + ROOT_LOGIN + shared.removeprefix(SHEBANG)
