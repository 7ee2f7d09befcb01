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
from skyward.core.validation import check_secret, check_text
from skyward.model.spec import Options, Spec
from skyward.providers.cloud import root_login
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.tensordock.api import TensorDockAPI

DEFAULT_IMAGE = "ubuntu2404_ml_everything"
ROOT_LOGIN = root_login.keys_of("user")
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
        check_text(
            "TensorDock", "image_name", self.image_name,
            f'give a TensorDock image id such as "ubuntu2404", or leave it out for "{DEFAULT_IMAGE}"',
        )
        check_text(
            "TensorDock", "region", self.region,
            'give part of a location ("United States", "Texas") or a location id, or None for anywhere',
            optional=True,
        )
        check_secret("TensorDock", "api_token", self.api_token, "the API token", "$TENSORDOCK_API_TOKEN")

    def api(self) -> TensorDockAPI:
        return TensorDockAPI(self.api_token.strip() if self.api_token else None)

    def image(self, spec: Spec) -> str:
        return self.image_name.strip()

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The shared boot script, after a step that lets the order's key log in as root."""
        return root_login.before(ROOT_LOGIN, MachineCloud.boot_script(self, spec, options))
