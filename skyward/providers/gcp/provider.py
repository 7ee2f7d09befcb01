"""``sky.GCP(zone="us-central1-a")``: Compute Engine virtual machines on Google Cloud.

Offers are the zone's machine types of the families skyward offers (e2/n2/n1 CPU types,
a2/a3/g2 types with their GPUs, and N1 machines with T4, V100, P100 or P4 GPUs attached),
on-demand and spot (``provisioningModel: SPOT``, deleted when Google reclaims it), priced
live from Google's Cloud Billing Catalog API (the Cloud Billing API enabled in the
project is all it needs), else from skyward's dated price snapshot with a
``PriceSnapshotWarning`` (see ``prices``). Each
pool's instances carry a network tag of their own, admitted by two firewall rules of the
pool (SSH from anywhere, everything from the pool's own instances); each node is one
instance of ``boot_image`` (default: Ubuntu 24.04) with the pool's SSH key in its metadata and
the labels ``skyward-pool``, ``skyward-owner`` and ``skyward-expires``. Closing deletes the
instances (confirmed), then the firewall rules. See docs/providers.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skyward.containers import refuse_container
from skyward.core.validation import fail
from skyward.model.spec import Spec
from skyward.providers.cloud.provider import MachineCloud
from skyward.providers.gcp.api import GCPAPI, OPERATION_TIMEOUT
from skyward.providers.gcp.auth import project_of, token_for

UBUNTU_24_04 = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[a-z0-9.-]+:[a-z][a-z0-9-]{4,28}[a-z0-9]$")
NETWORK = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class GCP(MachineCloud):
    """Compute Engine instances in ``zone`` ("us-central1-a", ...) of ``project`` (None:
    ``$GOOGLE_CLOUD_PROJECT``, then the credentials file's project) on ``network``.
    ``boot_image``: the boot image (an image or image family URL; default Ubuntu 24.04 LTS);
    ``credentials_file``: a service-account key or ADC file (None:
    ``$GOOGLE_APPLICATION_CREDENTIALS``, then gcloud's application-default credentials);
    ``operation_timeout``: seconds one of Compute Engine's operations may take."""

    name: ClassVar[str] = "gcp"
    label: ClassVar[str] = "GCP"

    zone: str = "us-central1-a"
    project: str | None = None
    network: str = "default"
    boot_image: str = UBUNTU_24_04
    credentials_file: str | None = None
    operation_timeout: float = OPERATION_TIMEOUT

    def __post_init__(self) -> None:
        refuse_container("GCP", "boot_image", self.boot_image)
        if not isinstance(self.zone, str) or not ZONE.match(self.zone):
            raise fail("GCP", "zone", self.zone, 'give a Compute Engine zone such as "us-central1-a" or "europe-west4-b"')
        if self.project is not None and (not isinstance(self.project, str) or not PROJECT.match(self.project)):
            raise fail("GCP", "project", self.project, "give a project id (6-30 lowercase letters, digits or dashes)")
        if not isinstance(self.network, str) or not NETWORK.match(self.network):
            raise fail("GCP", "network", self.network, 'give a VPC network name such as "default"')
        if not isinstance(self.boot_image, str) or not self.boot_image.strip():
            raise fail("GCP", "boot_image", self.boot_image, f"give an image or image family URL such as {UBUNTU_24_04!r}")
        if self.credentials_file is not None and (not isinstance(self.credentials_file, str) or not self.credentials_file):
            raise fail("GCP", "credentials_file", self.credentials_file, "give the path of a JSON credentials file")
        if isinstance(self.operation_timeout, bool) or not isinstance(self.operation_timeout, (int, float)) or (
            self.operation_timeout <= 0
        ):
            raise fail("GCP", "operation_timeout", self.operation_timeout, "give a positive number of seconds")

    def api(self) -> GCPAPI:
        token = token_for(Path(self.credentials_file).expanduser() if self.credentials_file else None)
        project = project_of(self.project, token.identity)
        return GCPAPI(project, self.zone, self.network, token.headers, float(self.operation_timeout))

    def image(self, spec: Spec) -> str:
        """The boot image, as the order carries it."""
        return self.boot_image

    def region_of(self, spec: Spec) -> str | None:
        return self.zone

    def refuse(self, spec: Spec) -> None:
        if spec.region is not None and spec.region != self.zone:
            raise fail("Spec", "region", spec.region, f"sky.GCP works in its zone ({self.zone}); give GCP(zone=...)")
