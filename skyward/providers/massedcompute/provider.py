"""``sky.MassedCompute(region=None)``: GPU virtual machines on Massed Compute.

Offers are the products of the GPU inventory in the regions that have room for them now,
at Massed Compute's live hourly prices (it sells no spot VMs: ``allocation="spot"`` is
refused). Each pool registers its SSH key; each node is one VM of ``image_id`` (default:
the first Ubuntu image) launched with that key and skyward's boot script as its startup
command. Closing terminates the VMs (confirmed), then deletes the key. See
docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_secret, fail
from skyward.model.spec import Options, Spec
from skyward.providers.cloud import root_login
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.massedcompute.api import MassedComputeAPI

REGION = re.compile(r"^[a-z0-9-]+$")
ROOT_LOGIN = (
    "for home in /home/*; do [ -s \"$home/.ssh/authorized_keys\" ] && install -d -m 700 /root/.ssh && "
    "cat \"$home/.ssh/authorized_keys\" >> /root/.ssh/authorized_keys; done; chmod 600 /root/.ssh/authorized_keys || true\n"
)
"""Massed Compute's images give the key to their user (``ubuntu``); skyward logs in as root."""


@dataclass(frozen=True, slots=True)
class MassedCompute(MachineCloud):
    """Massed Compute VMs in ``region`` (a region name of the inventory such as
    "us-central-3"; None: any region with room). ``image_id``: an image id from ``GET
    /images`` (None: the first Ubuntu image); ``api_key``: the API key (None:
    ``$MASSED_COMPUTE_API_KEY``)."""

    name: ClassVar[str] = "massedcompute"
    label: ClassVar[str] = "Massed Compute"
    spot_market: ClassVar[bool] = False

    region: str | None = None
    image_id: int | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("MassedCompute", "image_id", self.image_id)
        if self.region is not None and (not isinstance(self.region, str) or not REGION.match(self.region)):
            raise fail("MassedCompute", "region", self.region, 'give a region name such as "us-central-3", or None for any')
        if self.image_id is not None and (isinstance(self.image_id, bool) or not isinstance(self.image_id, int)
                                          or self.image_id <= 0):
            raise fail("MassedCompute", "image_id", self.image_id, "give a positive image id from GET /images, or None")
        check_secret("MassedCompute", "api_key", self.api_key, "the API key", "$MASSED_COMPUTE_API_KEY")

    def api(self) -> MassedComputeAPI:
        return MassedComputeAPI(self.api_key.strip() if self.api_key else None)

    def image(self, spec: Spec) -> str:
        """The image id; empty for the first Ubuntu image."""
        return str(self.image_id) if self.image_id is not None else ""

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The shared boot script, after a step that lets the VM's key log in as root."""
        return root_login.before(ROOT_LOGIN, MachineCloud.boot_script(self, spec, options))
