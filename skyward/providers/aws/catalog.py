"""EC2 instance types of a region, as EC2 describes them, and which satisfy a Spec.

``instance_types`` reads ``DescribeInstanceTypes`` (all pages) once per region and keeps
the result for a week under ``$SKYWARD_HOME/cache/aws``; ``candidates`` keeps the
current-generation types that satisfy a Spec's accelerator (name, memory, count,
through the accelerator catalog), vCPUs, memory and architecture, smallest first.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from skyward.core.accelerators import matches
from skyward.core.paths import skyward_dir
from skyward.model.spec import Spec
from skyward.providers.aws.session import client, explain
from skyward.providers.cloud import fields
from skyward.providers.cloud.api import MachineType
from skyward.providers.cloud.fields import JsonObject

TYPES_TTL = 7 * 24 * 3600.0
MIN_VCPUS = 2
MIN_MEMORY_GB = 4.0
"""What a node needs at least when the Spec does not say (Ray, the agent, a task)."""
ARCHITECTURES = {"x86_64": "x86_64", "arm64": "arm64"}


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One EC2 instance type."""

    name: str
    vcpus: int
    memory_gb: float
    architecture: str
    accelerator: str | None = None
    accelerator_count: int = 0
    accelerator_memory_gb: float | None = None
    spot: bool = True
    current: bool = True


def instance_types(region: str) -> list[InstanceType]:
    """Every instance type EC2 offers in ``region`` (cached)."""
    path = cache_path(region, "types")
    cached = read_cache(path, TYPES_TTL)
    if cached is not None:
        return [from_record(item) for item in fields.as_objects(cached, "the cached instance types")]
    ec2 = client("ec2", region)
    found: list[InstanceType] = []
    try:
        for page in ec2.get_paginator("describe_instance_types").paginate():
            found.extend(parse_type(item) for item in fields.objects(page, "InstanceTypes"))
    except Exception as exc:
        raise explain(exc, "listing instance types", region) from exc
    write_cache(path, [asdict(t) for t in found])
    return found


def candidates(types: list[InstanceType], spec: Spec) -> list[InstanceType]:
    """The current-generation types that satisfy ``spec``, smallest first (none for a
    spot-only Spec on a type without spot). Unset fields mean
    at least ``MIN_VCPUS`` vCPUs and ``MIN_MEMORY_GB`` of memory, on this client's
    architecture (so the wheels it ships fit)."""
    fits = [t for t in types if t.current and _fits(t, spec)]
    fits.sort(key=lambda t: (t.accelerator_count, t.vcpus, t.memory_gb, t.name))
    return fits


def _fits(kind: InstanceType, spec: Spec) -> bool:
    return (spec.allocation != "spot" or kind.spot) and hardware_fits(kind, spec)


def hardware_fits(kind: InstanceType | MachineType, spec: Spec) -> bool:
    """Whether one machine of ``kind`` (an EC2 type or another cloud's) has ``spec``'s
    vCPUs, memory, architecture and accelerator (unset: at least ``MIN_VCPUS`` and
    ``MIN_MEMORY_GB``, this client's architecture, no accelerator)."""
    if kind.vcpus < (spec.vcpus if spec.vcpus is not None else MIN_VCPUS):
        return False
    if kind.memory_gb < (spec.memory_gb if spec.memory_gb is not None else MIN_MEMORY_GB):
        return False
    if kind.architecture != (spec.architecture or client_architecture()):
        return False
    if spec.accelerator is None:
        return kind.accelerator is None
    if kind.accelerator is None:
        return False
    return matches(spec.accelerator, kind.accelerator, kind.accelerator_memory_gb, kind.accelerator_count)


def client_architecture() -> str:
    """This machine's architecture as Spec names it."""
    import platform

    return {"aarch64": "arm64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())


def parse_type(item: JsonObject) -> InstanceType:
    """One instance type of a ``DescribeInstanceTypes`` answer."""
    accelerator: str | None = None
    count = 0
    memory: float | None = None
    gpus, neurons = fields.obj(item, "GpuInfo"), fields.obj(item, "NeuronInfo")
    devices = fields.objects(gpus, "Gpus") or fields.objects(neurons, "NeuronDevices")
    if devices:
        accelerator, count = fields.text(devices[0], "Name"), fields.integer(devices[0], "Count", 1)
        memory = fields.number(fields.obj(devices[0], "MemoryInfo"), "SizeInMiB", 0) / 1024 or None
    listed = fields.items(fields.obj(item, "ProcessorInfo"), "SupportedArchitectures")
    architectures = [fields.to_text(a, "SupportedArchitectures") for a in listed]
    architectures = architectures or ["x86_64"]
    architecture = next((ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES), architectures[0])
    classes = item.get("SupportedUsageClasses", ["spot"])
    return InstanceType(
        name=fields.text(item, "InstanceType"),
        vcpus=fields.integer(fields.obj(item, "VCpuInfo"), "DefaultVCpus"),
        memory_gb=fields.number(fields.obj(item, "MemoryInfo"), "SizeInMiB") / 1024,
        architecture=architecture,
        accelerator=accelerator,
        accelerator_count=count,
        accelerator_memory_gb=memory,
        spot=isinstance(classes, list) and "spot" in classes,
        current=bool(item.get("CurrentGeneration", True)),
    )


def from_record(item: JsonObject) -> InstanceType:
    """An instance type as ``instance_types`` wrote it to its cache (``asdict``), and as
    the price snapshot holds it."""
    return InstanceType(
        name=fields.text(item, "name"),
        vcpus=fields.integer(item, "vcpus"),
        memory_gb=fields.number(item, "memory_gb"),
        architecture=fields.text(item, "architecture"),
        accelerator=fields.text(item, "accelerator", "") or None,
        accelerator_count=fields.integer(item, "accelerator_count", 0),
        accelerator_memory_gb=fields.number_or_none(item, "accelerator_memory_gb"),
        spot=bool(item.get("spot", True)),
        current=bool(item.get("current", True)),
    )


def cache_path(region: str, what: str) -> Path:
    """Where ``what`` of ``region`` is cached; keyed by the EC2 endpoint too, so a test
    emulator's answers never mix with the real cloud's."""
    endpoint = client("ec2", region).meta.endpoint_url
    key = hashlib.sha256(endpoint.encode()).hexdigest()[:8]
    return skyward_dir("cache") / "aws" / f"{region}-{what}-{key}.json"


def read_cache(path: Path, ttl: float) -> object:
    """The JSON at ``path`` if younger than ``ttl`` seconds, else None."""
    try:
        if time.time() - path.stat().st_mtime > ttl:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_cache(path: Path, data: object) -> None:
    """Write ``data`` as JSON at ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{time.monotonic_ns()}.part")
    partial.write_text(json.dumps(data))
    partial.replace(path)
