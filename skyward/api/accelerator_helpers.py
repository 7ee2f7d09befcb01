"""The older accelerator names and helpers: ``sky.AcceleratorSpec.NVIDIA.H100()``, the
``sky.NVIDIA`` literal type, ``is_nvidia``, ``is_trainium``, ``current_accelerator`` and
``select_instance`` over plain ``InstanceCandidate`` records (no cloud calls)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from skyward.core.accelerator_catalog import BY_NAME, identify
from skyward.core.accelerators import FACTORIES, Accelerator, TPUSlice, matches, parse_accelerator
from skyward.core.instance import instance_info
from skyward.core.validation import check_number, fail

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:GB|G|GIB)?\s*", re.IGNORECASE)

NVIDIA = Literal[
    "B300", "B300-SXM", "B200", "B200-SXM", "B100", "B100-SXM", "GB200", "GH200", "GH200-96GB",
    "GH200-144GB", "H200", "H200-SXM", "H200-NVL", "H100", "H100-80GB", "H100-94GB", "H100-SXM",
    "H100-PCIe", "H100-NVL", "H800", "H800-80GB", "H800-94GB", "H800-SXM", "H800-PCIe", "H800-NVL",
    "H20", "A100", "A100-80GB", "A100-40GB", "A100-SXM", "A100-PCIe", "A800", "A800-80GB",
    "A800-40GB", "A800-SXM", "A800-PCIe", "A40", "A30", "A16", "A10", "A10G", "A2", "L40S", "L40",
    "L20", "L4", "T4", "T4G", "V100", "V100-16GB", "V100-32GB", "V100-SXM", "V100-PCIe", "P100",
    "P100-16GB", "P100-12GB", "P100-SXM", "P100-PCIe", "P40", "P4", "K80", "M60", "RTX_PRO_6000",
    "RTX_6000_Ada", "RTX_5000_Ada", "RTX_4000_Ada", "RTX_A6000", "RTX_A5000", "RTX_A4500",
    "RTX_A4000", "RTX_A2000", "RTX_A2000-12GB", "RTX_A2000-6GB", "Quadro_RTX_8000",
    "Quadro_RTX_6000", "Quadro_RTX_5000", "RTX_5090", "RTX_5080", "RTX_4090", "RTX_4080", "RTX_4070_Ti",
    "RTX_3090_Ti", "RTX_3090", "RTX_3080_Ti", "RTX_3080", "RTX_3080-10GB", "RTX_3080-12GB",
    "RTX_3070", "RTX_3060", "RTX_3060-12GB", "RTX_3060-8GB", "RTX_2080_Ti",
]
"""NVIDIA model names as strings: each catalog name, ``NAME-<memory>`` for models sold in
several sizes and ``NAME-<form factor>``; every value is accepted by ``parse_accelerator``."""


class AcceleratorSpec:
    """The older namespaced factories: ``sky.AcceleratorSpec.NVIDIA.H100(count=4)``,
    ``.AWS.Trainium(version=2)``, ``.Google.TPU(version="v5p")``, ``.AMD.MI("300X")``."""

    class NVIDIA:
        """Every NVIDIA factory of ``sky.accelerators``, e.g. ``H100(count=, memory=, mig=)``."""

    class AWS:
        """AWS Trainium and Inferentia chips."""

        @staticmethod
        def Trainium(version: Literal[1, 2, 3] = 2, *, count: float = 1) -> Accelerator:
            """Trainium of the given generation (``sky.accelerators.Trainium2()``)."""
            return _versioned("Trainium", "AWS.Trainium", version, count)

        @staticmethod
        def Inferentia(version: Literal[1, 2] = 2, *, count: float = 1) -> Accelerator:
            """Inferentia of the given generation (``sky.accelerators.Inferentia2()``)."""
            return _versioned("Inferentia", "AWS.Inferentia", version, count)

    class Google:
        """Google Cloud TPUs."""

        @staticmethod
        def TPU(version: str = "v5p", *, count: float = 1) -> Accelerator:
            """``count`` TPU chips of a generation: "v2", "v3", "v4", "v5e", "v5p", "v6e"."""
            return _versioned("TPU", "Google.TPU", str(version).lower(), count)

        TPUSlice = staticmethod(TPUSlice)

    class AMD:
        """AMD Instinct accelerators."""

        @staticmethod
        def MI(model: str = "300X", *, count: float = 1) -> Accelerator:
            """An Instinct part by its number: ``MI("300X")`` is ``sky.accelerators.MI300X()``."""
            return _versioned("MI", "AMD.MI", str(model).upper(), count)


def _fill_nvidia_namespace() -> None:
    for name, make in FACTORIES.items():
        if BY_NAME[name].manufacturer == "NVIDIA":
            setattr(AcceleratorSpec.NVIDIA, name, staticmethod(make))


_fill_nvidia_namespace()


def _versioned(prefix: str, owner: str, version: object, count: float) -> Accelerator:
    make = FACTORIES.get(f"{prefix}{version}")
    if make is None:
        known = ", ".join(repr(n.removeprefix(prefix)) for n in FACTORIES if n.startswith(prefix))
        raise fail(owner, "version", version, f"use one of {known}")
    return make(count=count)


def _model_of(value: str | Accelerator) -> tuple[str, str | None]:
    """(manufacturer, kind) of an accelerator or a name; ("", None) when unknown."""
    if isinstance(value, Accelerator):
        model = value.model
        return (model.manufacturer, model.kind) if model else (value.manufacturer, None)
    seen = identify(value) if isinstance(value, str) else None
    return (seen.model.manufacturer, seen.model.kind) if seen else ("", None)


def is_nvidia(accelerator: str | Accelerator) -> bool:
    """True for NVIDIA parts: ``is_nvidia("H100")``, ``is_nvidia("Tesla T4")``; names outside
    the catalog count when they say NVIDIA, Tesla, GeForce or Quadro."""
    manufacturer, _ = _model_of(accelerator)
    if manufacturer == "NVIDIA":
        return True
    if manufacturer or not isinstance(accelerator, str):
        return False
    return bool(re.search(r"\b(nvidia|tesla|geforce|quadro)\b", accelerator, re.IGNORECASE))


def is_trainium(accelerator: str | Accelerator) -> bool:
    """True for AWS Trainium: ``is_trainium("Trainium2")``, ``is_trainium("trn1")``."""
    return _model_of(accelerator)[1] == "Trainium"


def current_accelerator() -> str | None:
    """Inside a task, the catalog name of this node's accelerator (``"H100"``); None outside
    a task, on CPU-only nodes and for accelerators the catalog does not know."""
    info = instance_info()
    if info is None or info.accelerator is None:
        return None
    seen = identify(info.accelerator.type)
    return seen.model.name if seen else None


@dataclass(frozen=True, slots=True)
class InstanceCandidate:
    """One kind of machine a cloud offers, as plain data for ``select_instance``.

    ``accelerator`` is the cloud's name for its devices ("A100", "NVIDIA A10G", "v5p-8"),
    ``accelerator_count`` how many, ``accelerator_memory_gb`` the memory of one.
    """

    name: str
    vcpus: float
    memory_gb: float
    accelerator: str | None = None
    accelerator_count: float = 0
    accelerator_memory_gb: float | None = None
    accelerator_form_factor: str | None = None
    hourly_price: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            allowed = "give the instance type, e.g. 'p4d.24xlarge'"
            raise fail("InstanceCandidate", "name", self.name, allowed)
        check_number("InstanceCandidate", "vcpus", self.vcpus, minimum=0)
        check_number("InstanceCandidate", "memory_gb", self.memory_gb, minimum=0)
        check_number("InstanceCandidate", "accelerator_count", self.accelerator_count, minimum=0)

    def satisfies(
        self, accelerator: Accelerator | None, cpu: float | None, memory_gb: float | None
    ) -> bool:
        """Whether this machine has the accelerator (see ``matches``), vCPUs and memory."""
        if cpu is not None and self.vcpus < cpu:
            return False
        if memory_gb is not None and self.memory_gb < memory_gb:
            return False
        if accelerator is None:
            return True
        return self.accelerator is not None and matches(
            accelerator, self.accelerator, self.accelerator_memory_gb, self.accelerator_count,
            self.accelerator_form_factor,
        )


def select_instance(
    available_instances: Iterable[InstanceCandidate],
    accelerator: str | Accelerator | None = None,
    cpu: float | None = None,
    memory: str | float | None = None,
) -> InstanceCandidate:
    """The smallest instance that has ``accelerator`` (an ``Accelerator`` or a string for
    ``parse_accelerator``), at least ``cpu`` vCPUs and at least ``memory`` ("128GB" or GB).

    Smallest means fewest accelerators, then fewest vCPUs, then least memory, then lowest
    price, then name. ValueError when none fits, naming what was asked for.
    """
    candidates = tuple(available_instances)
    for item in candidates:
        if not isinstance(item, InstanceCandidate):
            got = f"{type(item).__name__} {item!r}"
            raise TypeError(f"select_instance() takes InstanceCandidate records, got {got}")
    wanted = parse_accelerator(accelerator) if isinstance(accelerator, str) else accelerator
    if wanted is not None and not isinstance(wanted, Accelerator):
        allowed = "pass sky.accelerators.H100() or a name like \"H100\""
        raise fail("select_instance", "accelerator", accelerator, allowed)
    check_number("select_instance", "cpu", cpu, optional=True, strictly_positive=True)
    memory_gb = _gigabytes(memory)
    fitting = [c for c in candidates if c.satisfies(wanted, cpu, memory_gb)]
    if not fitting:
        asked = ", ".join(part for part in (
            wanted and f"{wanted.count:g}x {wanted.name} {wanted.memory or ''}".rstrip(),
            cpu is not None and f">= {cpu:g} vCPUs",
            memory_gb is not None and f">= {memory_gb:g}GB memory",
        ) if part)
        names = ", ".join(c.name for c in candidates) or "none"
        asked = asked or "what was asked"
        raise ValueError(f"select_instance: no instance has {asked} (candidates: {names})")
    return min(fitting, key=lambda c: (
        c.accelerator_count, c.vcpus, c.memory_gb,
        float("inf") if c.hourly_price is None else c.hourly_price, c.name,
    ))


def _gigabytes(memory: str | float | None) -> float | None:
    if memory is None:
        return None
    if isinstance(memory, (int, float)) and not isinstance(memory, bool) and memory > 0:
        return float(memory)
    size = _SIZE.fullmatch(memory) if isinstance(memory, str) else None
    if size is None:
        allowed = "give a size such as \"128GB\" or a number of GB"
        raise fail("select_instance", "memory", memory, allowed)
    return float(size.group(1))
