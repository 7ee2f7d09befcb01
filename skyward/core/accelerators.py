"""Accelerator catalog: ``sky.accelerators.A100()``, ``sky.accelerators.H100(count=8)``.

Every model of ``skyward.core.accelerator_catalog`` has a factory here. Factories are
keyword-only: ``count`` (default 1; fractions such as 0.5 share a device), ``memory``
(one of the card's sizes, default first), ``form_factor`` ("SXM", "PCIe", "NVL") where
the card ships in several, and ``mig`` (a profile such as "3g.40gb") on MIG-capable
cards. They return a frozen ``Accelerator``. ``TPUSlice("v5p-8")`` names a TPU slice,
``Custom(...)`` anything outside the catalog, ``parse_accelerator`` reads strings
("H100:8", "A100-40GB") and ``matches`` tells a provider whether a machine satisfies one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from skyward.core.accelerator_catalog import (
    BY_NAME,
    CATALOG,
    SPELLINGS,
    AcceleratorModel,
    FormFactor,
    MigProfile,
    Variant,
    identify,
    nearest_variant,
    spelling_key,
)
from skyward.core.validation import check_number, fail

_FORM_FACTORS: dict[str, FormFactor] = {"SXM": "SXM", "PCIE": "PCIe", "NVL": "NVL"}
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:GB|G|GIB)?\s*", re.IGNORECASE)
_COUNT_FIRST = re.compile(r"\s*(\d+(?:\.\d+)?)\s*[x×]\s*(.+)", re.IGNORECASE)
_COUNT_LAST = re.compile(r"(.+?)\s*:\s*(\d+(?:\.\d+)?)\s*")


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One kind of accelerator and how many of it a node needs.

    For catalog models, ``memory``, ``form_factor`` and ``mig`` are checked against the
    catalog (None: any). ``tpu_slice`` names a TPU slice ("v5p-8"), whose chips ``count`` is.
    """

    name: str
    memory: str | None = None
    count: float = 1
    form_factor: str | None = None
    manufacturer: str = "NVIDIA"
    mig: str | None = None
    tpu_slice: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise fail("Accelerator", "name", self.name, "give the accelerator's name, e.g. 'A100'")
        check_number(self.name, "count", self.count, strictly_positive=True)
        model = self.model
        if model is not None:
            _variant(model, self.memory, self.form_factor)
        if self.mig is not None:
            self._check_mig(model)

    @property
    def model(self) -> AcceleratorModel | None:
        """The catalog record, or None for ``Custom`` accelerators and unknown names."""
        return None if self.manufacturer == "custom" else BY_NAME.get(self.name)

    @property
    def memory_gb(self) -> float | None:
        """Memory per card in GB, parsed from ``memory`` (``"80GB"`` -> 80.0)."""
        if self.memory is None:
            return None
        return float(self.memory.upper().removesuffix("GB"))

    @property
    def is_trainium(self) -> bool:
        """True for AWS Trainium parts."""
        model = self.model
        return model.kind == "Trainium" if model else self.name.lower().startswith("trainium")

    @property
    def mig_profile(self) -> MigProfile | None:
        """The MIG profile named by ``mig`` (None without one)."""
        model = self.model
        if self.mig is None or model is None:
            return None
        variant = _variant(model, self.memory, self.form_factor)
        return next(p for p in variant.mig if p.name == self.mig)

    @property
    def workers_per_gpu(self) -> int:
        """Workers one device holds: the MIG profile's instances per GPU, else 1."""
        profile = self.mig_profile
        return profile.workers_per_gpu if profile else 1

    @property
    def workers_per_node(self) -> int:
        """Workers a node runs: ``workers_per_gpu * count`` with MIG, else 1 (one worker
        drives all of the node's devices)."""
        return self.workers_per_gpu * int(self.count) if self.mig is not None else 1

    def _check_mig(self, model: AcceleratorModel | None) -> None:
        if model is None or not model.supports_mig:
            capable = ", ".join(m.name for m in CATALOG if m.supports_mig)
            allowed = f"{self.name} does not support MIG (MIG-capable: {capable})"
            raise fail(self.name, "mig", self.mig, allowed)
        variant = _variant(model, self.memory, self.form_factor)
        names = [p.name for p in variant.mig]
        if self.mig not in names:
            allowed = f"{self.name} {variant.memory} takes {', '.join(names)}"
            raise fail(self.name, "mig", self.mig, allowed)
        if self.count != int(self.count):
            allowed = "with mig= the count must be a whole number of GPUs"
            raise fail(self.name, "count", self.count, allowed)


def _variant(model: AcceleratorModel, memory: str | None, form_factor: str | None) -> Variant:
    """The variant with this memory and form factor (None: the first that fits)."""
    fits_memory = [v for v in model.variants if memory is None or v.memory == memory]
    if not fits_memory:
        allowed = f"{model.name} comes with {', '.join(model.memories)}"
        raise fail(model.name, "memory", memory, allowed)
    if form_factor is None:
        return fits_memory[0]
    for variant in fits_memory:
        if form_factor in variant.form_factors:
            return variant
    if not model.form_factors:
        allowed = f"{model.name} comes in one form factor; omit form_factor"
    elif memory is not None and any(form_factor in v.form_factors for v in model.variants):
        sizes = ", ".join(v.memory for v in model.variants if form_factor in v.form_factors)
        forms = ", ".join(fits_memory[0].form_factors)
        allowed = f"{model.name} {memory} comes as {forms}; {form_factor} comes with memory {sizes}"
    else:
        allowed = f"use one of {', '.join(model.form_factors)}"
    raise fail(model.name, "form_factor", form_factor, allowed)


def _memory(owner: str, value: str | None) -> str | None:
    if value is None:
        return None
    size = _MEMORY.fullmatch(value) if isinstance(value, str) else None
    if size is None:
        raise fail(owner, "memory", value, "give a size such as \"80GB\"")
    number = float(size.group(1))
    return f"{int(number) if number.is_integer() else number}GB"


def _form_factor(owner: str, value: str | None) -> FormFactor | None:
    if value is None:
        return None
    form = _FORM_FACTORS.get(value.upper()) if isinstance(value, str) else None
    if form is None:
        raise fail(owner, "form_factor", value, "use one of SXM, PCIe, NVL")
    return form


def build(
    model: AcceleratorModel,
    *,
    count: float = 1,
    memory: str | None = None,
    form_factor: str | None = None,
    mig: str | None = None,
) -> Accelerator:
    """An ``Accelerator`` of a catalog model; the default memory is that of the first
    variant that fits the form factor. ValueError names a field that does not fit."""
    memory = _memory(model.name, memory)
    form = _form_factor(model.name, form_factor)
    variant = _variant(model, memory, form)
    return Accelerator(model.name, variant.memory, count, form, model.manufacturer, mig)


def _factory(model: AcceleratorModel) -> Callable[..., Accelerator]:
    def make(
        *,
        count: float = 1,
        memory: str | None = None,
        form_factor: str | None = None,
        mig: str | None = None,
    ) -> Accelerator:
        return build(model, count=count, memory=memory, form_factor=form_factor, mig=mig)

    details = [f"memory {' or '.join(model.memories)}"]
    if model.form_factors:
        details.append(f"form_factor {', '.join(model.form_factors)}")
    for variant in model.variants:
        if variant.mig:
            details.append(f"mig ({variant.memory}) {', '.join(p.name for p in variant.mig)}")
    make.__name__ = make.__qualname__ = model.name
    kind = f"{model.manufacturer} {model.architecture}"
    make.__doc__ = f"{model.name} ({kind}); {'; '.join(details)}."
    return make


def Custom(name: str, *, memory: str | None = None, count: float = 1) -> Accelerator:
    """An accelerator outside the catalog."""
    return Accelerator(name, _memory(name, memory), count, None, "custom")


def TPUSlice(name: str) -> Accelerator:
    """A Google TPU slice such as ``"v5p-8"``, ``"v5litepod-16"`` or ``"v6e-8"``; ``count``
    is its chips (``"v5p-8"``: 4 chips, as v2-v5p slices count TensorCores)."""
    seen = identify(name) if isinstance(name, str) else None
    if seen is None or seen.tpu_slice is None:
        allowed = "give a slice such as 'v5p-8', 'v5litepod-8' or 'v6e-8'"
        raise fail("TPUSlice", "name", name, allowed)
    model = seen.model
    memory, chips = model.variants[0].memory, seen.tpu_chips or 1
    return Accelerator(model.name, memory, chips, None, model.manufacturer, None, seen.tpu_slice)


def parse_accelerator(text: str) -> Accelerator:
    """An ``Accelerator`` from a string, case-insensitively: ``"A100"``, ``"A100-40GB"``,
    ``"H100:8"`` or ``"8xH100"``, ``"H100-SXM"``, ``"A100:0.5"``, ``"v5p-8"``, and vendor
    spellings such as ``"NVIDIA A100-SXM4-80GB"``. ValueError for unknown names lists
    close matches."""
    if not isinstance(text, str) or not text.strip():
        allowed = "give a name such as \"A100\", \"H100:8\" or \"A100-40GB\""
        raise fail("accelerator", "name", text, allowed)
    name, count = text.strip(), 1.0
    if first := _COUNT_FIRST.fullmatch(name):
        count, name = float(first.group(1)), first.group(2)
    elif last := _COUNT_LAST.fullmatch(name):
        name, count = last.group(1), float(last.group(2))
    seen = identify(name)
    if seen is None:
        raise ValueError(f"accelerator {text!r} is not in the catalog: {_suggest(name)}")
    if seen.tpu_slice is not None:
        return TPUSlice(seen.tpu_slice)
    memory = None if seen.memory_gb is None else f"{seen.memory_gb:g}GB"
    return build(seen.model, count=int(count) if count.is_integer() else count, memory=memory,
                 form_factor=seen.form_factor)


def _suggest(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(spelling_key(name), SPELLINGS, n=6, cutoff=0.6)
    names = list(dict.fromkeys(SPELLINGS[k].name for k in close))[:3]
    examples = "known names include A100, H100, L4, T4, MI300X, v5p-8."
    hint = f"did you mean {', '.join(names)}?" if names else examples
    return f"{hint} (sky.accelerators.Custom(name) describes anything else)"


def matches(
    accelerator: Accelerator,
    name: str,
    memory_gb: float | None = None,
    count: float = 1,
    form_factor: str | None = None,
) -> bool:
    """Whether a machine's devices, as a cloud reports them, satisfy ``accelerator``.

    ``name`` is the cloud's or driver's spelling ("A100", "NVIDIA A100-SXM4-80GB", "Tesla
    T4", "v5p-8"); ``memory_gb`` the memory of one device (AWS's ``SizeInMiB / 1024`` will
    do: sizes a little under the listed one still count), None to take it from ``name``;
    ``count`` the devices on the machine (ignored for a TPU slice name, whose chips count);
    ``form_factor`` when the cloud knows it, else read from ``name``. Memory only matters
    for models sold in several sizes; unknown memory or form factor is not held against
    the machine. The machine needs at least ``accelerator.count`` devices.
    """
    model = accelerator.model
    if model is None:
        if _plain(name) != _plain(accelerator.name):
            return False
        wanted = accelerator.memory_gb
        if wanted is not None and memory_gb is not None and memory_gb < wanted * 0.85:
            return False
        return count >= accelerator.count
    seen = identify(name)
    if seen is None or seen.model is not model:
        return False
    if seen.tpu_chips is not None:
        if accelerator.tpu_slice is not None and seen.tpu_slice != accelerator.tpu_slice:
            return False
        count = seen.tpu_chips
    if accelerator.memory is not None and len(model.variants) > 1:
        reported = memory_gb if memory_gb is not None else seen.memory_gb
        variant = None if reported is None else nearest_variant(model, reported)
        if variant is not None and variant.memory != accelerator.memory:
            return False
        if variant is None and memory_gb is not None:
            return False
    reported_form = _FORM_FACTORS.get(form_factor.upper()) if form_factor else seen.form_factor
    if accelerator.form_factor and reported_form and reported_form != accelerator.form_factor:
        return False
    return count >= accelerator.count


def _plain(name: str) -> str:
    return "".join(re.split(r"[\s_\-/]+", name.upper()))


FACTORIES: dict[str, Callable[..., Accelerator]] = {m.name: _factory(m) for m in CATALOG}
globals().update(FACTORIES)

__all__ = [  # noqa: PLE0604 - the factories' names come from the catalog
    "Accelerator", "Custom", "TPUSlice", "build", "matches", "parse_accelerator", *FACTORIES,
]
