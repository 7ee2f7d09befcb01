"""``sky.Lambda(region=None)``: GPU instances on Lambda Cloud (``sky.LambdaCloud`` is the
same class, the original project's name for it).

Offers are the instance types in the regions that have room for them now, at Lambda's
live hourly prices (Lambda sells no spot instances: ``allocation="spot"`` is refused).
Each pool registers its SSH key; each node is one instance of ``image_family`` (default:
Lambda Stack) behind a firewall ruleset of the pool's own in its region, reachable from
outside on SSH only. Closing terminates the instances (confirmed), then deletes the
rulesets and the key. See docs/providers.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import check_choice, check_secret, check_text
from skyward.model.spec import Options, Spec
from skyward.providers.cloud import root_login
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.lambda_cloud.api import LambdaAPI

REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-east-3",
    "us-west-1",
    "us-west-2",
    "us-west-3",
    "us-south-1",
    "us-south-2",
    "us-south-3",
    "us-midwest-1",
    "europe-central-1",
    "europe-south-1",
    "asia-south-1",
    "asia-northeast-1",
    "asia-northeast-2",
    "me-west-1",
    "australia-southeast-1",
)
ROOT_LOGIN = root_login.keys_of("ubuntu")
"""Lambda's images give the instance's SSH key to ``ubuntu``; skyward logs in as root."""


@dataclass(frozen=True, slots=True)
class Lambda(MachineCloud):
    """Lambda instances in ``region`` (one of ``REGIONS``; None: any region with room).
    ``image_family``: an image family from ``GET /images`` such as "lambda-stack-24-04"
    (None: Lambda's default, the latest Lambda Stack); ``api_key``: the API key (None:
    ``$LAMBDA_API_KEY``, else ``api_key`` in ``~/.lambda_cloud/lambda_keys``)."""

    name: ClassVar[str] = "lambda"
    label: ClassVar[str] = "Lambda"
    spot_market: ClassVar[bool] = False
    regions: ClassVar[tuple[str, ...] | None] = REGIONS

    region: str | None = None
    image_family: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        refuse_container("Lambda", "image_family", self.image_family)
        if self.region is not None:
            check_choice("Lambda", "region", self.region, REGIONS)
        check_text(
            "Lambda", "image_family", self.image_family,
            'give an image family such as "lambda-stack-24-04", or None for Lambda Stack', optional=True,
        )
        check_secret(
            "Lambda", "api_key", self.api_key, "the API key", "$LAMBDA_API_KEY (or ~/.lambda_cloud/lambda_keys)"
        )

    def api(self) -> LambdaAPI:
        return LambdaAPI(self.api_key.strip() if self.api_key else None)

    def image(self, spec: Spec) -> str:
        """The image family; empty for Lambda's default (the latest Lambda Stack)."""
        return self.image_family.strip() if self.image_family else ""

    def boot_script(self, spec: Spec, options: Options) -> str:
        """The shared boot script, after a step that lets the instance's key log in as root."""
        return root_login.before(ROOT_LOGIN, MachineCloud.boot_script(self, spec, options))


LambdaCloud = Lambda
"""The original project's name for this provider."""
