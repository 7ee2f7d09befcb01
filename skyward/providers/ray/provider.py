"""``sky.Ray(address=...)``: attach to a Ray cluster someone already runs.

The client becomes a Ray driver of that cluster (``ray.init(address=...)``; Ray Client
``ray://`` addresses are refused, it is deprecated upstream). The cluster's alive nodes
(head first, then by address) become the pool's nodes, or the first ``nodes`` of them;
one ``NodeAgent`` is pinned to each by node affinity.
Closing the pool kills only the actors it created and disconnects (``ray.shutdown``,
unless Ray was already connected to that cluster by the user): the cluster, and
anything else running on it, is never stopped.

One process holds one Ray connection: a ``sky.Local()`` pool (private Ray) and a
``sky.Ray`` pool cannot be open in the same process at once, and neither can two
``sky.Ray`` pools on different clusters (several pools on the same cluster share the
connection).

Token auth: the token comes from ``Ray(token=...)``, else the ``RAY_AUTH_TOKEN``
environment variable; either switches the client to ``RAY_AUTH_MODE=token`` for the
connection. With neither, Ray's own settings apply (``RAY_AUTH_MODE=token`` with
``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from skyward.core.allocation import minimum_spot
from skyward.core.validation import check_number, fail
from skyward.image.image import local_python
from skyward.model.spec import DEFAULT_TTL, Options, Spec
from skyward.providers.base import LaunchedCluster, Offer
from skyward.storage.client import Storage

DEFAULT_PORT = 6379
_ADDRESS_HELP = (
    'give the GCS address of the cluster\'s head as "host:port" (the port `ray start --head` '
    'printed, 6379 by default), e.g. sky.Ray(address="10.0.0.5:6379"), or set RAY_ADDRESS'
)


@dataclass(frozen=True, slots=True)
class Ray:
    """An existing Ray cluster at ``address`` ("host:port" of its head's GCS; default:
    the ``RAY_ADDRESS`` environment variable). ``nodes`` takes the first N alive nodes
    (head first) instead of all of them. ``token`` is the cluster's auth token when it
    runs with token auth (default: ``RAY_AUTH_TOKEN``)."""

    name: ClassVar[str] = "ray"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()

    address: str | None = None
    nodes: int | None = None
    token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.address is not None:
            _parse_address(self.address)
        check_number("Ray", "nodes", self.nodes, minimum=1, integer=True, optional=True)
        if self.token is not None and (not isinstance(self.token, str) or not self.token.strip()):
            raise fail("Ray", "token", "***", "give the cluster's auth token as a non-empty string, or leave it None")

    def resolved_address(self) -> tuple[str, int]:
        """``(host, port)`` of the cluster, from ``address`` or ``RAY_ADDRESS``."""
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            raise fail("Ray", "address", None, _ADDRESS_HELP)
        return _parse_address(address)

    def validate(self, spec: Spec, options: Options) -> None:
        """Refuse what attaching to an existing cluster cannot honour (before connecting)."""
        self.resolved_address()
        count = spec.node_count
        if self.nodes is not None and (count.desired not in (1, self.nodes) or count.elastic):
            raise fail(
                "Spec", "nodes", count.desired,
                f"it disagrees with sky.Ray(nodes={self.nodes}); set the count in one place",
            )
        for name in ("accelerator", "vcpus", "memory_gb", "disk_gb", "architecture", "region", "max_hourly_cost", "instance_type"):
            if getattr(spec, name) is not None:
                raise fail(
                    "Spec", name, getattr(spec, name),
                    "an attached Ray cluster's nodes are what they are; remove it (or pick nodes with sky.Ray(nodes=))",
                )
        if minimum_spot(spec.allocation, 1):
            raise fail(
                "Spec", "allocation", spec.allocation,
                "an attached Ray cluster has no spot capacity, so no spot share can be met; use the default",
            )
        if spec.ttl != DEFAULT_TTL:
            raise fail("Spec", "ttl", spec.ttl, "skyward does not stop a Ray cluster it did not start; remove it")
        image = spec.image
        if image.python != "auto" and image.python_version != local_python():
            raise fail(
                "Image", "python", image.python,
                f"the client is the cluster's Ray driver and runs Python {local_python()}; use \"auto\"",
            )
        for name in ("pip", "apt", "pip_extra_index_url", "pip_indexes", "shell_vars", "excludes", "includes"):
            if getattr(image, name):
                raise fail(
                    "Image", name, getattr(image, name),
                    "sky.Ray() does not install anything on a cluster it did not start; "
                    "install it on the cluster's nodes and remove it here",
                )
        if image.bootstrap_timeout != type(image)().bootstrap_timeout:
            raise fail("Image", "bootstrap_timeout", image.bootstrap_timeout, "sky.Ray() bootstraps nothing; remove it")
        if image.skyward_source not in ("auto", "local"):
            raise fail(
                "Image", "skyward_source", image.skyward_source,
                'the cluster\'s nodes must already have this skyward installed; use "auto"',
            )
        if spec.volumes or spec.plugins:
            raise NotImplementedError("Spec.volumes and Spec.plugins are not implemented for sky.Ray(); remove them")

    def offers(self, spec: Spec) -> list[Offer]:
        """An attached cluster is not priced here."""
        return []

    def default_storage(self, spec: Spec) -> Storage | None:
        """None: an attached cluster has no object storage skyward knows of."""
        return None

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Connect (or share this process's connection), pin one agent per chosen node;
        blocks until every agent answers or ``Options.provision_timeout`` passes."""
        from skyward.providers.ray.attach import launch_on_cluster  # Ray loads when a pool opens

        return launch_on_cluster(self, spec, options, pool_id)


def _parse_address(address: object) -> tuple[str, int]:
    if not isinstance(address, str) or not address.strip():
        raise fail("Ray", "address", address, _ADDRESS_HELP)
    text = address.strip()
    if text.startswith("ray://"):
        raise fail(
            "Ray", "address", address,
            "Ray Client (ray://) is deprecated upstream and not supported; skyward attaches as a Ray "
            "driver, so give the GCS address instead (same host, port 6379 by default, e.g. "
            '"10.0.0.5:6379") from a machine that can reach the cluster',
        )
    if "://" in text or text in ("auto", "local"):
        raise fail("Ray", "address", address, _ADDRESS_HELP)
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, str(DEFAULT_PORT)
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise fail("Ray", "address", address, _ADDRESS_HELP)
    return host, int(port_text)
