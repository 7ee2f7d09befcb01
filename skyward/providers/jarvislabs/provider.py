"""``sky.JarvisLabs(region=None)``: GPU instances on JarvisLabs.ai.

Offers are the GPU types of each region at 1, 2, 4 and 8 GPUs (as many as are free
now), at JarvisLabs' live hourly prices, and spot where it sells them (containers only).
Each pool registers its SSH key with the account (JarvisLabs installs the account's keys
in every instance); each node is one instance of ``template`` (default: the ``pytorch``
container), reached at its SSH host and port. Closing destroys the instances
(confirmed), then deletes the key. See docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_choice, check_secret, fail
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.jarvislabs.api import REGION_URLS, JarvisLabsAPI

REGIONS = tuple(REGION_URLS)
TEMPLATE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class JarvisLabs(MachineCloud):
    """JarvisLabs instances in ``region`` (one of ``REGIONS``; None: any region with the GPUs
    free). ``template``: a framework template id from ``jl templates`` ("pytorch",
    "tensorflow", ...) for a container, or "vm" for a virtual machine; ``api_key``: the
    API token (None: ``$JL_API_KEY``, else ``token`` under ``[auth]`` in
    ``~/.config/jl/config.toml``)."""

    name: ClassVar[str] = "jarvislabs"
    label: ClassVar[str] = "JarvisLabs"
    regions: ClassVar[tuple[str, ...] | None] = REGIONS

    region: str | None = None
    template: str = "pytorch"
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("JarvisLabs", "template", self.template)
        if self.region is not None:
            check_choice("JarvisLabs", "region", self.region, REGIONS)
        if not isinstance(self.template, str) or not TEMPLATE.match(self.template):
            raise fail(
                "JarvisLabs", "template", self.template,
                'give a template id from `jl templates` such as "pytorch", or "vm" for a virtual machine',
            )
        check_secret(
            "JarvisLabs", "api_key", self.api_key, "the API token", "$JL_API_KEY (or ~/.config/jl/config.toml)"
        )

    def api(self) -> JarvisLabsAPI:
        return JarvisLabsAPI(self.template, self.api_key.strip() if self.api_key else None)

    def image(self, spec: Spec) -> str:
        """The template each instance starts from."""
        return self.template

    def refuse(self, spec: Spec) -> None:
        if self.template == "vm" and spec.allocation == "spot":
            raise fail("Spec", "allocation", spec.allocation, 'JarvisLabs sells spot containers only, not VMs; use "on-demand"')
