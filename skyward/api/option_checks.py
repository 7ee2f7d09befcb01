"""No option without an effect: ``Options`` fields that no Spec of a pool can honour, and
``Nodes`` forms whose feature is not built yet, are refused when the pool is made,
naming the field.

Most fields act on the engine and so on every pool. A few act only where a provider has
a use for them (``ssh_timeout`` on machines reached over SSH, ...): each provider lists
those in ``options_used``, and such a field set to anything but its default must be used
by at least one of the pool's providers (a local spec may fall back to an SSH one that
uses it). Fields whose feature is not built yet are refused whatever the provider.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from skyward.api.spec import Options, Spec

PROVIDER_SPECIFIC = ("ssh_timeout", "bootstrap_timeout", "ssh_retry_interval")
NOT_BUILT = {
    "autoscale_cooldown": "elastic pools (autoscaling) are not implemented yet",
    "autoscale_idle_timeout": "elastic pools (autoscaling) are not implemented yet",
    "reconcile_tick_interval": "elastic pools (autoscaling) are not implemented yet",
    "retry_on_interruption": "retrying tasks of lost nodes is not implemented yet",
    "health_checker": "health checks are not implemented yet",
}
_DEFAULTS = Options()


def check_options(specs: tuple[Spec, ...], options: Options) -> None:
    """ValueError naming the first non-default field no provider of ``specs`` honours."""
    for field in fields(Options):
        value: Any = getattr(options, field.name)
        if value == getattr(_DEFAULTS, field.name):
            continue
        if field.name in NOT_BUILT:
            raise ValueError(f"Options.{field.name}={value!r} is not valid: {NOT_BUILT[field.name]}; remove it")
        if field.name in PROVIDER_SPECIFIC and not any(field.name in spec.provider.options_used for spec in specs):
            names = ", ".join(sorted({spec.provider.name for spec in specs}))
            raise ValueError(
                f"Options.{field.name}={value!r} has no effect on this pool's provider(s) ({names}): it applies "
                "to machines reached over SSH; remove it"
            )


def check_nodes(specs: tuple[Spec, ...]) -> None:
    """NotImplementedError for node counts no provider honours yet: elastic pools (a
    ``max`` above ``desired``) and partial readiness (a ``min`` below it)."""
    for spec in specs:
        nodes = spec.node_count
        if nodes.elastic:
            raise NotImplementedError(
                f"Spec.nodes={spec.nodes!r}: elastic pools (a max above desired) are not implemented yet; "
                "use a fixed node count"
            )
        if nodes.min is not None and nodes.min < nodes.desired:
            raise NotImplementedError(
                f"Spec.nodes={spec.nodes!r}: partial readiness (Nodes.min below desired) is not implemented yet; "
                "leave min unset"
            )
