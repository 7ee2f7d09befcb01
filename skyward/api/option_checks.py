"""No option without an effect: ``Options`` fields and ``Nodes`` forms that no Spec of a
pool can honour are refused when the pool is made, naming the field.

Most fields act on the engine and so on every pool. A few act only where a provider has
a use for them (``ssh_timeout`` on machines reached over SSH, ...): each provider lists
those in ``options_used``, and such a field set to anything but its default must be used
by at least one of the pool's providers (a local spec may fall back to an SSH one that
uses it). Fields and node counts that change a running pool's nodes (autoscaling,
partial readiness, health checks, ``pool.resize``) need a provider whose clusters can
add and remove nodes (``Provider.resizable``).
"""

from __future__ import annotations

from dataclasses import fields

from skyward.model.spec import Options, Spec
from skyward.providers.local.provider import KEEP_WARM_ENV, Local

PROVIDER_SPECIFIC = ("ssh_timeout", "bootstrap_timeout", "ssh_retry_interval")
NEEDS_MEMBERSHIP = ("autoscale_cooldown", "autoscale_idle_timeout", "reconcile_tick_interval", "health_checker")
_DEFAULTS = Options()


def resizable(spec: Spec) -> bool:
    """Whether ``spec``'s provider can add and remove nodes of a running pool."""
    return bool(getattr(spec.provider, "resizable", False))


def check_options(specs: tuple[Spec, ...], options: Options) -> None:
    """ValueError naming the first non-default field no provider of ``specs`` honours."""
    if options.keep_alive is not None:
        check_kept(specs, options)
    for field in fields(Options):
        value: object = getattr(options, field.name)
        if value == getattr(_DEFAULTS, field.name):
            continue
        if field.name in PROVIDER_SPECIFIC and not any(field.name in spec.provider.options_used for spec in specs):
            names = ", ".join(sorted({spec.provider.name for spec in specs}))
            raise ValueError(
                f"Options.{field.name}={value!r} has no effect on this pool's provider(s) ({names}): it applies "
                "to machines reached over SSH; remove it"
            )
        if field.name in NEEDS_MEMBERSHIP and not any(resizable(spec) for spec in specs):
            names = ", ".join(sorted({spec.provider.name for spec in specs}))
            raise ValueError(
                f"Options.{field.name}={value!r} has no effect on this pool's provider(s) ({names}): they cannot "
                "add or replace nodes of a running pool; remove it"
            )


def with_keep_warm(specs: tuple[Spec, ...], options: Options) -> Options:
    """``options`` with ``keep_alive`` set to the largest ``sky.Local(keep_warm=...)`` of
    ``specs`` when it is unset: keep_warm keeps the pool (docs/kept-pools.md). ValueError
    naming keep_warm when the pool cannot be kept (``check_kept``)."""
    warm = max((spec.provider.keep_warm for spec in specs if isinstance(spec.provider, Local)), default=0.0)
    if options.keep_alive is not None or warm <= 0:
        return options
    kept = options.with_(keep_alive=warm)
    try:
        check_kept(specs, kept)
    except ValueError as exc:
        raise ValueError(
            f"sky.Local(keep_warm={warm:g}) (or ${KEEP_WARM_ENV}) keeps the pool for the next script, as "
            f"Options.keep_alive does, and the pool cannot be kept: {exc}; or set keep_warm=0 for this pool"
        ) from None
    return kept


def check_kept(specs: tuple[Spec, ...], options: Options) -> None:
    """ValueError for what a kept pool cannot be: a pool on an existing Ray cluster; one
    with no node 0 (``min=0``: node 0 serves its collections, and a remote pool's head
    holds its Ray and relay)."""
    for spec in specs:
        if spec.provider.name == "ray":
            raise ValueError(
                f"Options.keep_alive={options.keep_alive!r} does not apply to sky.Ray() pools: the Ray cluster "
                "outlives the script already (connect to it again); remove it"
            )
        if spec.node_count.floor == 0:
            raise ValueError(
                f"Spec.nodes={spec.nodes!r} is not valid with Options.keep_alive: a kept pool keeps node 0, which "
                "serves its collections; give min=1 or more"
            )


def check_nodes(specs: tuple[Spec, ...]) -> None:
    """ValueError for a node count that changes while the pool runs (a ``min`` below
    ``desired``, a ``max`` above it) on a provider that cannot add or remove nodes."""
    for spec in specs:
        if spec.node_count.elastic and not resizable(spec):
            raise ValueError(
                f"Spec.nodes={spec.nodes!r} is not valid for sky.{type(spec.provider).__name__}(): its pools cannot "
                "add or remove nodes while they run (elastic pools, partial readiness, scale to zero); use a "
                "fixed count"
            )


def check_resizable(spec: Spec, what: str) -> None:
    """NotImplementedError naming ``what`` when ``spec``'s provider cannot resize a pool."""
    if not resizable(spec):
        raise NotImplementedError(
            f"{what}: sky.{type(spec.provider).__name__}() pools cannot add or remove nodes while they run; "
            "open a new pool with the count you need"
        )
