"""``sky.Vultr(region="ewr")``: Cloud Compute and Cloud GPU virtual machines on Vultr.

Offers are the plans sold in ``region`` at their live hourly cost (Vultr sells no spot
machines; GPU plans that hold only a share of one GPU, and bare-metal plans, which
firewall groups cannot guard, are not offered). Each pool gets a firewall group of its
own that admits SSH from anywhere and everything from the pool's own instances only;
each node is one instance of ``os_id`` (default: Ubuntu 24.04) with the pool's SSH key,
tagged ``skyward`` and with the pool's group. Closing deletes the instances (confirmed),
then the firewall group and the key. See docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_secret, fail
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.vultr.api import MAX_NODES, VultrAPI

UBUNTU_24_04 = 2284
"""Vultr's ``os_id`` of Ubuntu 24.04 LTS x64 (``GET /v2/os``)."""
REGION_ID = re.compile(r"^[a-z]{3,4}$")


@dataclass(frozen=True, slots=True)
class Vultr(MachineCloud):
    """Vultr instances in ``region`` (a region id from ``GET /v2/regions``: "ewr", "ord",
    "fra", ...; checked against that list before anything is created). ``os_id``: the OS
    image (``GET /v2/os``; default Ubuntu 24.04 x64); ``api_key``: the API key (None:
    ``$VULTR_API_KEY``, then ``api-key`` in ``~/.vultr-cli.yaml``)."""

    name: ClassVar[str] = "vultr"
    label: ClassVar[str] = "Vultr"
    spot_market: ClassVar[bool] = False

    region: str = "ewr"
    os_id: int = UBUNTU_24_04
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("Vultr", "os_id", self.os_id)
        if not isinstance(self.region, str) or not REGION_ID.match(self.region):
            raise fail(
                "Vultr",
                "region",
                self.region,
                'give a Vultr region id such as "ewr", "ord" or "fra"',
            )
        if isinstance(self.os_id, bool) or not isinstance(self.os_id, int) or self.os_id <= 0:
            raise fail(
                "Vultr",
                "os_id",
                self.os_id,
                f"give a positive OS id from GET /v2/os (Ubuntu 24.04 x64 is {UBUNTU_24_04})",
            )
        check_secret(
            "Vultr", "api_key", self.api_key, "the API key", "$VULTR_API_KEY (or api-key in ~/.vultr-cli.yaml)"
        )

    def api(self) -> VultrAPI:
        return VultrAPI(self.api_key.strip() if self.api_key else None)

    def image(self, spec: Spec) -> str:
        """The OS id, as the order carries it."""
        return str(self.os_id)

    def refuse(self, spec: Spec) -> None:
        if spec.node_count.ceiling > MAX_NODES:
            raise fail(
                "Spec",
                "nodes",
                spec.nodes,
                f"a Vultr firewall group holds 50 rules, which admit SSH and at most "
                f"{MAX_NODES} instances of a pool to each other; give at most {MAX_NODES} "
                "nodes (Nodes.max included)",
            )
