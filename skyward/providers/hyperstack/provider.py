"""``sky.Hyperstack(region="CANADA-1")``: GPU virtual machines on Hyperstack.

Offers are the flavors in stock in ``region``, priced live from Hyperstack's pricebook
(per GPU, times the flavor's GPU count; flavors of a ``-spot`` GPU as spot). Each pool
gets an environment of its own in ``region`` holding the pool's SSH keypair; each node is
one VM of ``image_name`` (default: the region's newest Ubuntu image with CUDA) with a
floating IP, reachable from outside on SSH only. Closing deletes the VMs (confirmed),
then the keypair and the environment. See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_choice, check_secret, fail
from skyward.model.spec import Options, Spec
from skyward.providers.cloud import root_login
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.hyperstack.api import HyperstackAPI

REGIONS = ("CANADA-1", "NORWAY-1", "US-1")
ROOT_LOGIN = root_login.keys_of("ubuntu")
"""Hyperstack's Ubuntu images take the keypair for ``ubuntu``; skyward logs in as root."""


@dataclass(frozen=True, slots=True)
class Hyperstack(MachineCloud):
    """Hyperstack VMs in ``region`` (one of ``REGIONS``). ``image_name``: an OS image name
    from ``GET /core/images`` (None: the newest Ubuntu with CUDA); ``api_key``: the API key
    (None: ``$HYPERSTACK_API_KEY``)."""

    name: ClassVar[str] = "hyperstack"
    label: ClassVar[str] = "Hyperstack"
    regions: ClassVar[tuple[str, ...] | None] = REGIONS

    region: str = "CANADA-1"
    image_name: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("Hyperstack", "image_name", self.image_name)
        check_choice("Hyperstack", "region", self.region, REGIONS)
        if self.image_name is not None and (
            not isinstance(self.image_name, str) or not self.image_name
        ):
            raise fail(
                "Hyperstack",
                "image_name",
                self.image_name,
                'give an image name such as "Ubuntu Server 22.04 LTS R535 CUDA 12.2", or None',
            )
        check_secret("Hyperstack", "api_key", self.api_key, "the API key", "$HYPERSTACK_API_KEY")

    def api(self) -> HyperstackAPI:
        return HyperstackAPI(self.region, self.api_key.strip() if self.api_key else None)

    def image(self, spec: Spec) -> str:
        """The image name; empty for the region's newest Ubuntu with CUDA (found at creation)."""
        return self.image_name or ""

    def refuse(self, spec: Spec) -> None:
        if spec.region is not None and spec.region != self.region:
            raise fail(
                "Spec",
                "region",
                spec.region,
                "a pool's environment lives in one region: "
                f'give sky.Hyperstack(region="{spec.region}")',
            )

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The shared boot script, after a step that lets the keypair log in as root."""
        return root_login.before(ROOT_LOGIN, MachineCloud.boot_script(self, spec, options))
