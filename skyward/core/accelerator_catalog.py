"""The accelerator catalog as data: one frozen ``AcceleratorModel`` record per model.

Memory is per device (one GPU, one TPU chip, one Trainium/Inferentia chip) in GB, the
size the vendor lists for that variant; the first variant of a model is its default.
MIG tables follow NVIDIA's MIG user guide ("Supported GPUs", "Supported MIG Profiles")
and the default mig-parted configuration shipped with NVIDIA's GPU operator; the ``+me``
(media extension) profiles, which fit once per GPU, are left out.

``identify`` turns the spellings clouds and drivers use ("NVIDIA A100-SXM4-80GB",
"Tesla T4", "H100 80GB HBM3", "AMD Instinct MI300X", "v5p-8") into a catalog record.
"""

from __future__ import annotations

import re
from typing import Literal

from msgspec import Struct

Manufacturer = Literal["NVIDIA", "AMD", "AWS", "Google", "Intel"]
Kind = Literal["GPU", "TPU", "Trainium", "Inferentia", "Gaudi"]
Segment = Literal["datacenter", "workstation", "consumer"]
FormFactor = Literal["SXM", "PCIe", "NVL"]


class MigProfile(Struct, frozen=True):
    """One MIG profile (``"3g.40gb"``) and how many of it fit on one GPU."""

    name: str
    workers_per_gpu: int

    @property
    def memory_gb(self) -> int:
        """Memory of one instance of the profile: ``"3g.40gb"`` -> 40."""
        return int(self.name.split(".", 1)[1].removesuffix("gb"))


class Variant(Struct, frozen=True):
    """One memory size of a model, the form factors it ships in and its MIG profiles."""

    memory_gb: int
    form_factors: tuple[FormFactor, ...] = ()
    mig: tuple[MigProfile, ...] = ()

    @property
    def memory(self) -> str:
        """The memory as factories take it: ``"80GB"``."""
        return f"{self.memory_gb}GB"


class AcceleratorModel(Struct, frozen=True):
    """One accelerator model: who makes it, what it is, and its variants (first = default)."""

    name: str
    manufacturer: Manufacturer
    kind: Kind
    architecture: str
    variants: tuple[Variant, ...]
    segment: Segment = "datacenter"
    aliases: tuple[str, ...] = ()
    """Other names clouds and drivers give it (vendor prefixes and memory need not be listed)."""

    @property
    def memories(self) -> tuple[str, ...]:
        """Memory sizes, default first: ``("80GB", "94GB")``."""
        return tuple(dict.fromkeys(v.memory for v in self.variants))

    @property
    def form_factors(self) -> tuple[FormFactor, ...]:
        """Every form factor any variant ships in."""
        return tuple(dict.fromkeys(f for v in self.variants for f in v.form_factors))

    @property
    def supports_mig(self) -> bool:
        """True when some variant can be split into MIG instances."""
        return any(v.mig for v in self.variants)


def _mig(table: str) -> tuple[MigProfile, ...]:
    """``"1g.10gb x7, 3g.40gb x2"`` -> profiles, with how many fit on one GPU."""
    pairs = (item.strip().split(" x") for item in table.split(","))
    return tuple(MigProfile(name, int(count)) for name, count in pairs)


# MIG tables, by GPU memory. The NVIDIA MIG user guide also lists 1g.10gb x4 on the
# A100-40GB (driver R470 and later), which the older skyward reference left out.
MIG_40GB = _mig("1g.5gb x7, 1g.10gb x4, 2g.10gb x3, 3g.20gb x2, 4g.20gb x1, 7g.40gb x1")
MIG_80GB = _mig("1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g.40gb x1, 7g.80gb x1")
MIG_A30 = _mig("1g.6gb x4, 2g.12gb x2, 4g.24gb x1")
MIG_94GB = _mig("1g.12gb x7, 1g.24gb x4, 2g.24gb x3, 3g.47gb x2, 4g.47gb x1, 7g.94gb x1")
MIG_96GB = _mig("1g.12gb x7, 1g.24gb x4, 2g.24gb x3, 3g.48gb x2, 4g.48gb x1, 7g.96gb x1")
MIG_H200 = _mig("1g.18gb x7, 1g.35gb x4, 2g.35gb x3, 3g.71gb x2, 4g.71gb x1, 7g.141gb x1")
MIG_GH200_144 = _mig("1g.18gb x7, 1g.36gb x4, 2g.36gb x3, 3g.72gb x2, 4g.72gb x1, 7g.144gb x1")
MIG_B200 = _mig("1g.23gb x7, 1g.45gb x4, 2g.45gb x3, 3g.90gb x2, 4g.90gb x1, 7g.180gb x1")
MIG_GB200 = _mig("1g.23gb x7, 1g.47gb x4, 2g.47gb x3, 3g.93gb x2, 4g.93gb x1, 7g.186gb x1")
# B300: from the GPU operator's mig-parted config (v25.3); not yet in the MIG user guide we checked.
MIG_B300 = _mig("1g.34gb x7, 1g.67gb x4, 2g.67gb x3, 3g.135gb x2, 4g.135gb x1, 7g.269gb x1")
MIG_RTX_PRO_6000 = _mig("1g.24gb x4, 2g.48gb x2, 4g.96gb x1")

_SXM_PCIE: tuple[FormFactor, ...] = ("SXM", "PCIe")
_NVL_SXM: tuple[FormFactor, ...] = ("NVL", "SXM")


def _one(memory_gb: int, *forms: FormFactor, mig: tuple[MigProfile, ...] = ()) -> tuple[Variant]:
    return (Variant(memory_gb, forms, mig),)


def _nvidia(
    name: str,
    architecture: str,
    variants: tuple[Variant, ...],
    segment: Segment = "datacenter",
    aliases: tuple[str, ...] = (),
) -> AcceleratorModel:
    return AcceleratorModel(name, "NVIDIA", "GPU", architecture, variants, segment, aliases)


def _chip(
    name: str, manufacturer: Manufacturer, kind: Kind, memory_gb: int, aliases: tuple[str, ...] = ()
) -> AcceleratorModel:
    """A non-GPU accelerator; its architecture is its generation: "Trainium2", "v5p"."""
    generation = name.removeprefix("TPU") if kind == "TPU" else name
    return AcceleratorModel(name, manufacturer, kind, generation, _one(memory_gb), aliases=aliases)


def _amd(name: str, architecture: str, memory_gb: int, segment: Segment = "datacenter",
         aliases: tuple[str, ...] = ()) -> AcceleratorModel:
    return AcceleratorModel(name, "AMD", "GPU", architecture, _one(memory_gb), segment, aliases)


CATALOG: tuple[AcceleratorModel, ...] = (
    # NVIDIA data centre. B200/GB200 sizes are what the devices expose (NVIDIA's MIG
    # "Supported GPUs" table: 180GB, 186GB); the older reference quoted the physical
    # 192GB, and 384GB for a GB200 superchip (two GPUs). B100/B300 use the listed
    # 192GB/288GB (unsure what they expose).
    _nvidia("B300", "Blackwell Ultra", _one(288, "SXM", mig=MIG_B300)),
    _nvidia("B200", "Blackwell", _one(180, "SXM", mig=MIG_B200)),
    _nvidia("B100", "Blackwell", _one(192, "SXM")),
    _nvidia("GB200", "Grace Blackwell", _one(186, mig=MIG_GB200)),
    _nvidia("GH200", "Grace Hopper", (Variant(96, mig=MIG_96GB), Variant(144, mig=MIG_GH200_144))),
    _nvidia("H200", "Hopper", _one(141, "SXM", "NVL", mig=MIG_H200)),
    # The older reference lists an H100 40GB; NVIDIA sells no such part, so it is not here.
    _nvidia("H100", "Hopper", (Variant(80, _SXM_PCIE, MIG_80GB), Variant(94, _NVL_SXM, MIG_94GB))),
    _nvidia("H800", "Hopper", (Variant(80, _SXM_PCIE, MIG_80GB), Variant(94, ("NVL",), MIG_94GB))),
    _nvidia("H20", "Hopper", _one(96, mig=MIG_96GB)),
    _nvidia("A100", "Ampere", (Variant(80, _SXM_PCIE, MIG_80GB), Variant(40, _SXM_PCIE, MIG_40GB))),
    _nvidia("A800", "Ampere", (Variant(80, _SXM_PCIE, MIG_80GB), Variant(40, ("PCIe",), MIG_40GB))),
    _nvidia("A40", "Ampere", _one(48)),
    _nvidia("A30", "Ampere", _one(24, mig=MIG_A30)),
    # A16, K80 and M60 boards carry several GPUs; clouds list them per GPU, as here.
    _nvidia("A16", "Ampere", _one(16)),
    _nvidia("A10", "Ampere", _one(24)),
    _nvidia("A10G", "Ampere", _one(24)),
    _nvidia("A2", "Ampere", _one(16)),
    _nvidia("L40S", "Ada Lovelace", _one(48)),
    _nvidia("L40", "Ada Lovelace", _one(48)),
    _nvidia("L20", "Ada Lovelace", _one(48)),
    _nvidia("L4", "Ada Lovelace", _one(24)),
    _nvidia("T4", "Turing", _one(16)),
    _nvidia("T4G", "Turing", _one(16)),
    _nvidia("V100", "Volta", (Variant(16, _SXM_PCIE), Variant(32, _SXM_PCIE))),
    _nvidia("P100", "Pascal", (Variant(16, _SXM_PCIE), Variant(12, ("PCIe",)))),
    _nvidia("P40", "Pascal", _one(24)),
    _nvidia("P4", "Pascal", _one(8)),
    _nvidia("K80", "Kepler", _one(12)),
    _nvidia("M60", "Maxwell", _one(8)),
    _nvidia("RTX_PRO_6000", "Blackwell", _one(96, mig=MIG_RTX_PRO_6000),
            aliases=("RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server Edition")),
    # NVIDIA workstation
    _nvidia("RTX_6000_Ada", "Ada Lovelace", _one(48), "workstation"),
    _nvidia("RTX_5000_Ada", "Ada Lovelace", _one(32), "workstation"),
    _nvidia("RTX_4000_Ada", "Ada Lovelace", _one(20), "workstation"),
    _nvidia("RTX_A6000", "Ampere", _one(48), "workstation"),
    _nvidia("RTX_A5000", "Ampere", _one(24), "workstation"),
    _nvidia("RTX_A4500", "Ampere", _one(20), "workstation"),
    _nvidia("RTX_A4000", "Ampere", _one(16), "workstation"),
    _nvidia("RTX_A2000", "Ampere", (Variant(12), Variant(6)), "workstation"),
    _nvidia("Quadro_RTX_8000", "Turing", _one(48), "workstation"),
    _nvidia("Quadro_RTX_6000", "Turing", _one(24), "workstation"),
    _nvidia("Quadro_RTX_5000", "Turing", _one(16), "workstation"),
    # NVIDIA consumer
    _nvidia("RTX_5090", "Blackwell", _one(32), "consumer"),
    _nvidia("RTX_5080", "Blackwell", _one(16), "consumer"),
    _nvidia("RTX_4090", "Ada Lovelace", _one(24), "consumer"),
    _nvidia("RTX_4080", "Ada Lovelace", _one(16), "consumer"),
    _nvidia("RTX_4070_Ti", "Ada Lovelace", _one(12), "consumer"),
    _nvidia("RTX_3090_Ti", "Ampere", _one(24), "consumer"),
    _nvidia("RTX_3090", "Ampere", _one(24), "consumer"),
    _nvidia("RTX_3080_Ti", "Ampere", _one(12), "consumer"),
    _nvidia("RTX_3080", "Ampere", (Variant(10), Variant(12)), "consumer"),
    _nvidia("RTX_3070", "Ampere", _one(8), "consumer"),
    _nvidia("RTX_3060", "Ampere", (Variant(12), Variant(8)), "consumer"),
    _nvidia("RTX_2080_Ti", "Turing", _one(11), "consumer"),
    # AMD
    _amd("MI355X", "CDNA 4", 288),
    _amd("MI325X", "CDNA 3", 256),
    _amd("MI300X", "CDNA 3", 192),
    _amd("MI300A", "CDNA 3", 128),
    _amd("MI250X", "CDNA 2", 128),
    _amd("MI250", "CDNA 2", 128),
    _amd("MI210", "CDNA 2", 64),
    _amd("MI100", "CDNA", 32),
    _amd("Radeon_Pro_V520", "RDNA", 8, aliases=("V520",)),  # AWS g4ad
    _amd("Radeon_Pro_V620", "RDNA 2", 32, aliases=("V620",)),
    _amd("Radeon_Pro_W7900", "RDNA 3", 48, "workstation", aliases=("W7900",)),
    # AWS (memory per chip). Trainium3: 144GB as announced; unsure.
    _chip("Trainium1", "AWS", "Trainium", 32, ("Trainium", "trn1")),
    _chip("Trainium2", "AWS", "Trainium", 96, ("trn2",)),
    _chip("Trainium3", "AWS", "Trainium", 144, ("trn3",)),
    _chip("Inferentia1", "AWS", "Inferentia", 8, ("Inferentia", "inf1")),
    _chip("Inferentia2", "AWS", "Inferentia", 32, ("inf2",)),
    # Google Cloud TPU (HBM per chip)
    _chip("TPUv2", "Google", "TPU", 16, ("v2",)),
    _chip("TPUv3", "Google", "TPU", 32, ("v3",)),
    _chip("TPUv4", "Google", "TPU", 32, ("v4",)),
    _chip("TPUv5e", "Google", "TPU", 16, ("v5e", "v5litepod", "TPU v5 lite", "v5lite")),
    _chip("TPUv5p", "Google", "TPU", 95, ("v5p",)),
    _chip("TPUv6e", "Google", "TPU", 32, ("v6e", "Trillium")),
    # Intel Gaudi (AWS dl1 runs the first generation, which EC2 calls "Gaudi HL-205")
    _chip("Gaudi", "Intel", "Gaudi", 32, ("Gaudi HL-205", "HL-205", "Gaudi1")),
    _chip("Gaudi2", "Intel", "Gaudi", 96),
    _chip("Gaudi3", "Intel", "Gaudi", 128),
)

BY_NAME: dict[str, AcceleratorModel] = {model.name: model for model in CATALOG}

# TPU slice names count TensorCores for these generations (two per chip) and chips for
# the others: "v5p-8" is 4 chips, "v5litepod-8" and "v6e-8" are 8.
# Slices are spelled as the Cloud TPU API spells accelerator types ("v5litepod-8").
_TPU_CORES_PER_CHIP = {"TPUv2": 2, "TPUv3": 2, "TPUv4": 2, "TPUv5p": 2}
_TPU_SLICE_PREFIX = {"TPUv5e": "v5litepod"}

_NOISE = frozenset({
    "NVIDIA", "TESLA", "GEFORCE", "AMD", "INSTINCT", "AWS", "AMAZON", "GOOGLE", "CLOUD", "INTEL",
    "HABANA", "GPU", "TENSOR", "CORE", "GENERATION", "HBM", "HBM2", "HBM2E", "HBM3", "HBM3E",
    "GDDR6", "GDDR6X", "GDDR7", "OAM", "ACCELERATOR",
})
_MEMORY_TOKEN = re.compile(r"(\d+(?:\.\d+)?)(?:GB|G|GIB)")
_SLICE = re.compile(r"(?:TPU[\s_-]*)?(V\d+[A-Z]*)[\s_-]+(\d+)", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s_\-/,()]+")


class Identified(Struct, frozen=True):
    """What a vendor spelling says: the model, and the memory, form factor or TPU chips it names."""

    model: AcceleratorModel
    memory_gb: float | None = None
    form_factor: FormFactor | None = None
    tpu_chips: int | None = None
    tpu_slice: str | None = None


def _tokens(text: str) -> tuple[str, float | None, FormFactor | None]:
    """Split a spelling into (compact name key, memory token, form factor token)."""
    kept: list[str] = []
    memory: float | None = None
    form: FormFactor | None = None
    for token in _SEPARATORS.split(text.upper()):
        if not token or token in _NOISE:
            continue
        if size := _MEMORY_TOKEN.fullmatch(token):
            memory = float(size.group(1))
        elif re.fullmatch(r"SXM\d?", token):
            form = "SXM"
        elif token in ("PCIE", "NVL"):
            form = "PCIe" if token == "PCIE" else "NVL"
        else:
            kept.append(token)
    return "".join(kept), memory, form


def spelling_key(name: str) -> str:
    """The compact key spellings are looked up by: ``"NVIDIA RTX A6000"`` -> ``"RTXA6000"``."""
    return _tokens(name)[0]


def _index() -> dict[str, AcceleratorModel]:
    index: dict[str, AcceleratorModel] = {}
    for model in CATALOG:
        for spelling in (model.name, *model.aliases):
            key = spelling_key(spelling)
            if index.setdefault(key, model) is not model:
                both = f"{index[key].name} and {model.name}"
                raise AssertionError(f"catalog spelling {spelling!r} names both {both}")
    return index


SPELLINGS: dict[str, AcceleratorModel] = _index()
"""Compact upper-case spelling (``"RTXA6000"``, ``"TRN2"``) -> model."""


def identify(text: str) -> Identified | None:
    """The catalog model a vendor spelling names, or None when it names none."""
    if slice_match := _SLICE.fullmatch(text.strip()):
        model = SPELLINGS.get(spelling_key(slice_match.group(1)))
        if model is not None and model.kind == "TPU":
            number = int(slice_match.group(2))
            chips = number // _TPU_CORES_PER_CHIP.get(model.name, 1)
            prefix = _TPU_SLICE_PREFIX.get(model.name, model.architecture)
            return Identified(model, tpu_chips=max(chips, 1), tpu_slice=f"{prefix}-{number}")
    key, memory, form = _tokens(text)
    model = SPELLINGS.get(key)
    if model is None:
        return None
    return Identified(model, memory, form)


def nearest_variant(
    model: AcceleratorModel, memory_gb: float, tolerance: float = 0.15
) -> Variant | None:
    """The variant whose memory is closest to ``memory_gb`` (as clouds report it, in GB or
    GiB, often a little under the listed size), or None when none is within ``tolerance``."""
    best = min(model.variants, key=lambda v: abs(v.memory_gb - memory_gb))
    return best if abs(best.memory_gb - memory_gb) <= tolerance * best.memory_gb else None
