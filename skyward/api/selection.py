"""Which Spec of a pool to try first: ``Options.selection``.

"first" tries the Specs in the order given; "cheapest" by the lowest price among each
Spec's offers (a provider without prices counts as free: your own hosts, an attached
Ray cluster); "available" puts first the Specs whose provider has at least one offer
for them. A callable takes the tuple of Specs and returns them in the order to try (or
one Spec, tried first). ``select_first``, ``select_cheapest`` and ``select_available``
are the built-in ones. Whatever the order, a Spec that fails to provision falls through
to the next.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

from skyward.model.spec import ProviderConfig, Spec

Selector: TypeAlias = Callable[[tuple[Spec, ...]], Spec | Sequence[Spec]]
"""``Options.selection`` as a callable: the pool's Specs in, the one (or the order) to try out."""

ComputeSpec: TypeAlias = Spec
"""The older reference's name for the pool's Spec, as a ``ProviderSelector`` receives it."""

ProviderLike: TypeAlias = ProviderConfig | Sequence[ProviderConfig]
"""``ComputePool(provider=...)``: one provider, or several tried in ``selection`` order."""

ProviderSelector: TypeAlias = Callable[[tuple[ProviderConfig, ...], ComputeSpec], ProviderConfig]
"""The older reference's selector: given the providers and the Spec, the provider to try first."""

SelectionLike: TypeAlias = Literal["first", "cheapest", "available"] | ProviderSelector
"""``ComputePool(selection=...)``: a built-in strategy's name or a ``ProviderSelector``."""


def select_first(specs: tuple[Spec, ...]) -> list[Spec]:
    """In the order given."""
    return list(specs)


def select_cheapest(specs: tuple[Spec, ...]) -> list[Spec]:
    """Cheapest offer first (stable for equal prices)."""
    return sorted(specs, key=cheapest_price)


def select_available(specs: tuple[Spec, ...]) -> list[Spec]:
    """Specs whose provider has an offer for them first (stable)."""
    return sorted(specs, key=lambda spec: 0 if _has_offers(spec) else 1)


BUILT_IN: dict[str, Selector] = {"first": select_first, "cheapest": select_cheapest, "available": select_available}


def order(specs: tuple[Spec, ...], selection: str | Selector) -> list[Spec]:
    """``specs`` in the order ``selection`` gives; TypeError when a callable returns
    anything but Specs of this pool."""
    if len(specs) == 1:
        return list(specs)
    selector = BUILT_IN[selection] if isinstance(selection, str) else selection
    chosen = selector(specs)  # checked below: a user's callable may return anything
    picked = [chosen] if isinstance(chosen, Spec) else list(chosen)
    for spec in picked:
        if not any(spec is candidate for candidate in specs):
            raise TypeError(
                f"Options.selection returned {spec!r}, which is not one of the pool's Specs; return one of "
                "the Specs it was given (or several, in the order to try)"
            )
    return picked + [spec for spec in specs if not any(spec is p for p in picked)]


def cheapest_price(spec: Spec) -> float:
    """The lowest hourly price among ``spec``'s offers: 0 for a provider without prices,
    infinity when the provider has none for it or cannot be asked."""
    try:
        offers = spec.provider.offers(spec)
    except Exception:  # no credentials, no network: it will fail (with its reason) at launch
        return math.inf
    if not offers:
        return math.inf if spec.provider.priced else 0.0
    return min(offer.hourly_price for offer in offers)


def _has_offers(spec: Spec) -> bool:
    return cheapest_price(spec) != math.inf
