"""Providers by name ("aws", "runpod", ...), for the ``sky`` command and skyward.toml:
their classes (imported on first use), which of them are clouds that ``sky gc`` and
``sky down`` clean, and where each finds its credentials."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skyward.providers.cloud.credentials import Source, find

if TYPE_CHECKING:
    from skyward.providers.base import Provider


@dataclass(frozen=True, slots=True)
class Known:
    """A provider by name: its class and, for a cloud, its credentials."""

    name: str
    module: str
    cls: str
    credentials: tuple[Source, ...] = ()
    cloud: bool = False
    region_field: str = "region"
    """The field that says where it runs (``sky gc --region``, ``sky down``): GCP's is ``zone``."""

    def load(self) -> Callable[..., Provider]:
        """The provider's class (it takes the provider's fields)."""
        found: Callable[..., Provider] = getattr(importlib.import_module(self.module), self.cls)
        return found


KNOWN: dict[str, Known] = {
    known.name: known
    for known in (
        Known("local", "skyward.providers.local.provider", "Local"),
        Known("ssh", "skyward.providers.ssh.provider", "SSH"),
        Known("ray", "skyward.providers.ray.provider", "Ray"),
        Known("container", "skyward.providers.container.provider", "Container"),
        Known("aws", "skyward.providers.aws.provider", "AWS", (
            Source(("AWS_ACCESS_KEY_ID", "AWS_PROFILE"), "~/.aws/credentials"),), cloud=True),
        Known("runpod", "skyward.providers.runpod.provider", "RunPod", (
            Source(("RUNPOD_API_KEY",), "~/.runpod/config.toml", "apikey"),), cloud=True),
        Known("vastai", "skyward.providers.vastai.provider", "VastAI", (
            Source(("VAST_API_KEY",), "~/.vast_api_key"),), cloud=True),
        Known("verda", "skyward.providers.verda.provider", "Verda", (
            Source(("VERDA_CLIENT_ID", "DATACRUNCH_CLIENT_ID")),
            Source(("VERDA_CLIENT_SECRET", "DATACRUNCH_CLIENT_SECRET"))), cloud=True),
        Known("digitalocean", "skyward.providers.digitalocean.provider", "DigitalOcean", (
            Source(("DIGITALOCEAN_TOKEN", "DIGITALOCEAN_ACCESS_TOKEN"), "~/.config/doctl/config.yaml", "access-token"),),
            cloud=True),
        Known("novita", "skyward.providers.novita.provider", "Novita", (Source(("NOVITA_API_KEY",)),), cloud=True),
        Known("hyperstack", "skyward.providers.hyperstack.provider", "Hyperstack", (
            Source(("HYPERSTACK_API_KEY",)),), cloud=True),
        Known("tensordock", "skyward.providers.tensordock.provider", "TensorDock", (
            Source(("TENSORDOCK_API_TOKEN",)),), cloud=True),
        Known("vultr", "skyward.providers.vultr.provider", "Vultr", (
            Source(("VULTR_API_KEY",), "~/.vultr-cli.yaml", "api-key"),), cloud=True),
        Known("lambda", "skyward.providers.lambda_cloud.provider", "Lambda", (
            Source(("LAMBDA_API_KEY",), "~/.lambda_cloud/lambda_keys", "api_key"),), cloud=True),
        Known("jarvislabs", "skyward.providers.jarvislabs.provider", "JarvisLabs", (
            Source(("JL_API_KEY",), "~/.config/jl/config.toml", "auth.token"),), cloud=True),
        Known("massedcompute", "skyward.providers.massedcompute.provider", "MassedCompute", (
            Source(("MASSED_COMPUTE_API_KEY",)),), cloud=True),
        Known("scaleway", "skyward.providers.scaleway.provider", "Scaleway", (
            Source(("SCW_SECRET_KEY",), "~/.config/scw/config.yaml", "secret_key"),
            Source(("SCW_DEFAULT_PROJECT_ID", "SCW_PROJECT_ID"), "~/.config/scw/config.yaml", "default_project_id")),
            cloud=True),
        Known("gcp", "skyward.providers.gcp.provider", "GCP", (
            Source(("GOOGLE_APPLICATION_CREDENTIALS",), "~/.config/gcloud/application_default_credentials.json"),),
            cloud=True, region_field="zone"),
    )
}
CLOUDS = tuple(name for name, known in KNOWN.items() if known.cloud)
SNAPSHOT_PRICED = ("aws",)
"""The clouds whose shipped snapshot holds machine types as well as prices (GCP's holds
prices alone: its machine types come from its API)."""


def known(name: str) -> Known:
    """The provider called ``name`` (case and dashes ignored); ValueError listing the names."""
    key = name.lower().replace("-", "").replace("_", "")
    if key not in KNOWN:
        raise ValueError(f"unknown provider {name!r}: use one of {', '.join(KNOWN)}")
    return KNOWN[key]


def make(name: str, **fields: object) -> Provider:
    """A provider of ``name`` with ``fields``; ValueError naming a field it does not take."""
    found = known(name)
    try:
        return found.load()(**fields)
    except TypeError as exc:
        raise ValueError(f"sky.{found.cls}(): {exc}") from None


def with_region(name: str, region: str | None) -> Provider:
    """A provider of ``name`` in ``region`` (its default when None)."""
    return make(name, **{known(name).region_field: region}) if region is not None else make(name)


def credentials_found(provider: Known) -> bool:
    """Whether this machine has every credential ``provider`` needs (environment or file)."""
    return all(find(provider.name, source) is not None for source in provider.credentials)


def clouds_with_credentials() -> list[Provider]:
    """A provider (default settings) of every cloud whose credentials this machine has."""
    return [make(name) for name in CLOUDS if credentials_found(KNOWN[name])]


def snapshot_priced() -> list[Provider]:
    """A provider (default settings) of every cloud that prices offers from the snapshot
    shipped with skyward, without credentials (each a ``base.SnapshotPriced``)."""
    return [make(name) for name in SNAPSHOT_PRICED]
