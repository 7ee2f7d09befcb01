"""Accelerator catalog: ``sky.accelerators.A100()``, ``sky.accelerators.H100(count=8)``.

Each factory is keyword-only, takes ``count`` (default 1) and, where the card comes in
several sizes, ``memory``; a few take ``form_factor``. They return an ``Accelerator``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skyward.api.validation import check_number, fail


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One kind of accelerator and how many of it a node needs."""

    name: str
    memory: str | None = None
    count: float = 1
    form_factor: str | None = None
    manufacturer: str = "NVIDIA"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise fail("Accelerator", "name", self.name, "give the accelerator's name, e.g. 'A100'")
        check_number("Accelerator", "count", self.count, strictly_positive=True)

    @property
    def memory_gb(self) -> float | None:
        """Memory per card in GB, parsed from ``memory`` (``"80GB"`` -> 80.0)."""
        if self.memory is None:
            return None
        return float(self.memory.upper().removesuffix("GB"))

    @property
    def is_trainium(self) -> bool:
        """True for AWS Trainium parts."""
        return self.name.lower().startswith("trainium")


# name -> (manufacturer, allowed memory sizes (first is the default), allowed form factors)
_CATALOG: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "B200": ("NVIDIA", ("192GB",), ()),
    "H200": ("NVIDIA", ("141GB",), ()),
    "H100": ("NVIDIA", ("80GB", "94GB"), ("SXM", "PCIe", "NVL")),
    "A100": ("NVIDIA", ("80GB", "40GB"), ("SXM", "PCIe")),
    "A40": ("NVIDIA", ("48GB",), ()),
    "A10G": ("NVIDIA", ("24GB",), ()),
    "A10": ("NVIDIA", ("24GB",), ()),
    "L40S": ("NVIDIA", ("48GB",), ()),
    "L40": ("NVIDIA", ("48GB",), ()),
    "L4": ("NVIDIA", ("24GB",), ()),
    "T4": ("NVIDIA", ("16GB",), ()),
    "V100": ("NVIDIA", ("16GB", "32GB"), ()),
    "RTX_4090": ("NVIDIA", ("24GB",), ()),
    "RTX_A6000": ("NVIDIA", ("48GB",), ()),
    "MI300X": ("AMD", ("192GB",), ()),
    "Trainium2": ("AWS", ("96GB",), ()),
}


def _factory(name: str) -> Any:
    manufacturer, memories, forms = _CATALOG[name]

    def make(*, count: float = 1, memory: str | None = None, form_factor: str | None = None) -> Accelerator:
        chosen = memory or memories[0]
        if chosen not in memories:
            raise fail(name, "memory", memory, f"{name} comes with {', '.join(memories)}")
        if form_factor is not None and form_factor not in forms:
            allowed = ", ".join(forms) if forms else "none (omit form_factor)"
            raise fail(name, "form_factor", form_factor, f"allowed: {allowed}")
        return Accelerator(name, chosen, count, form_factor, manufacturer)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"{name} ({manufacturer}); memory one of {', '.join(memories)}."
    return make


def Custom(name: str, *, memory: str | None = None, count: float = 1) -> Accelerator:  # noqa: N802
    """An accelerator outside the catalog."""
    return Accelerator(name, memory, count, None, "custom")


globals().update({name: _factory(name) for name in _CATALOG})

__all__ = ["Accelerator", "Custom", *_CATALOG]
