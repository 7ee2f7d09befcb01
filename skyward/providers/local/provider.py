"""``sky.Local()``: N nodes as N agent processes on this machine, on a private Ray instance.

Local nodes share this machine's working directory and sys.path, so functions and
classes from your own modules work as they are. They run in this Python environment, or,
when the Image asks for packages, in a virtual environment built from it here
(``env``); the pool's plugins apply as on remote pools. Spec fields that describe
a machine you cannot get here (an accelerator, a region, spot capacity, more CPUs or
memory than this machine has) are refused with a ValueError rather than ignored.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import psutil
from msgspec import structs

from skyward.core.allocation import minimum_spot
from skyward.core.validation import check_number, fail
from skyward.image.image import Image, local_python
from skyward.model.nodes import NodeHandle
from skyward.model.spec import DEFAULT_TTL, Options, Spec
from skyward.providers.base import LaunchedCluster, Offer, PhaseTiming
from skyward.providers.ray_import import import_ray

if TYPE_CHECKING:
    from skyward.storage.client import Storage

KEEP_WARM_ENV = "SKYWARD_KEEP_WARM"


def _keep_warm_default() -> float:
    value = os.environ.get(KEEP_WARM_ENV, "").strip()
    if not value:
        return 0.0
    try:
        return float(value)
    except ValueError:
        raise fail(KEEP_WARM_ENV, "value", value, "set it to a number of seconds, e.g. 600, or unset it") from None


@dataclass(frozen=True, slots=True)
class Local:
    """Run the pool's nodes as processes on this machine (the default provider).

    ``keep_warm``: seconds the pool is kept after its script, for the next run of a
    script that defines it the same way to adopt: the pool of ``Options(keep_alive=
    keep_warm)`` when that is unset (docs/kept-pools.md). 0, the default unless
    ``$SKYWARD_KEEP_WARM`` says otherwise, keeps nothing; ``sky down`` ends kept pools."""

    keep_warm: float = field(default_factory=_keep_warm_default)

    name: ClassVar[str] = "local"
    priced: ClassVar[bool] = False
    resizable: ClassVar[bool] = True
    local_processes: ClassVar[bool] = True
    options_used: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        check_number("Local", "keep_warm", self.keep_warm, minimum=0, finite=True)

    def validate(self, spec: Spec, options: Options) -> None:
        """Raise ValueError/NotImplementedError for what a local pool cannot honour."""
        _check_machine(spec)
        check_image(spec.image)
        if spec.instance_type is not None:
            raise fail("Spec", "instance_type", spec.instance_type, "a local pool runs on this machine; remove it")

    def offers(self, spec: Spec) -> list[Offer]:
        """This machine, at no price."""
        memory_gb = psutil.virtual_memory().total / 1024**3
        return [Offer(self.name, "local", float(os.cpu_count() or 1), memory_gb, 0.0, False, architecture=_machine())]

    def default_storage(self, spec: Spec) -> Storage | None:
        """None: this machine has no object storage of its own."""
        return None

    def launch(self, spec: Spec, options: Options, pool_id: str) -> LaunchedCluster:
        """Mount ``spec.volumes`` on this machine (the nodes share it), start (or share)
        the local Ray instance and one agent per node; blocks until every agent answers
        or ``Options.provision_timeout`` passes. Everything is undone if a step fails."""
        started = time.monotonic()
        with ExitStack() as volumes:
            if spec.volumes:  # storage loads for a pool with volumes
                from skyward.storage.pool_volumes import mounted

                volumes.enter_context(mounted(spec.volumes))
            mounting = time.monotonic() - started
            cluster = load_launch()(spec, options, pool_id)
            held = volumes.pop_all()
        stop = cluster.stop

        def stop_then_unmount() -> None:
            with held:
                stop()

        phases = ((PhaseTiming("volumes", mounting),) if spec.volumes else ()) + cluster.phases
        return structs.replace(cluster, stop=stop_then_unmount, phases=phases)


def load_launch() -> Callable[[Spec, Options, str], LaunchedCluster]:
    """``launch.start``, imported as a local pool's first open imports it: Ray and the
    agents' machinery, Ray without ``requests``, which its processes never call
    (``ray_import``)."""
    import_ray()
    from skyward.providers.local.launch import start

    return start


def local_handle(pool_id: str, node: int) -> NodeHandle:
    """Node ``node`` of the local pool ``pool_id``."""
    return NodeHandle(f"{pool_id}-{node}", "127.0.0.1", instance_type="local")


def _check_machine(spec: Spec) -> None:
    if spec.accelerator is not None:
        raise fail(
            "Spec", "accelerator", spec.accelerator,
            "sky.Local() runs on this machine's CPU; drop the accelerator or use a provider with GPUs",
        )
    cpus = os.cpu_count() or 1
    if spec.vcpus is not None and spec.vcpus > cpus:
        raise fail("Spec", "vcpus", spec.vcpus, f"this machine has {cpus} CPUs")
    memory_gb = psutil.virtual_memory().total / 1024**3
    if spec.memory_gb is not None and spec.memory_gb > memory_gb:
        raise fail("Spec", "memory_gb", spec.memory_gb, f"this machine has {memory_gb:.1f} GB")
    disk_gb = psutil.disk_usage(os.getcwd()).free / 1024**3
    if spec.disk_gb is not None and spec.disk_gb > disk_gb:
        raise fail("Spec", "disk_gb", spec.disk_gb, f"this machine has {disk_gb:.0f} GB free")
    machine = _machine()
    if spec.architecture is not None and spec.architecture != machine:
        raise fail("Spec", "architecture", spec.architecture, f"this machine is {machine}")
    if minimum_spot(spec.allocation, 1):
        raise fail(
            "Spec", "allocation", spec.allocation,
            "sky.Local() has no spot capacity, so no spot share can be met; use the default or \"on-demand\"",
        )
    if spec.region is not None:
        raise fail("Spec", "region", spec.region, "sky.Local() has no regions; remove it")
    if spec.ttl != DEFAULT_TTL:
        raise fail(
            "Spec", "ttl", spec.ttl,
            "local nodes stop with the client (Spec.ttl is how long remote nodes outlive a vanished client); remove it",
        )


def check_image(image: Image) -> None:
    """Raise ValueError naming the Image field a local pool cannot honour."""
    if image.python != "auto" and image.python != local_python():
        raise fail(
            "Image", "python", image.python,
            f"local nodes run this interpreter ({local_python()}); use \"auto\" or run the client with it",
        )
    if image.apt:
        raise fail(
            "Image", "apt", image.apt,
            "sky.Local() does not install system packages on this machine; install them here "
            "(apt-get install ...) and remove them, or use a remote provider",
        )
    if image.excludes:
        raise fail("Image", "excludes", image.excludes, "local nodes use includes in place, nothing is shipped; remove it")
    if image.pip_indexes and not image.pip:
        name = "pip_extra_index_url" if image.pip_extra_index_url else "pip_indexes"
        raise fail("Image", name, getattr(image, name), "it only applies to Image.pip packages; add them or remove it")
    if image.skyward_source not in ("auto", "local"):
        raise fail("Image", "skyward_source", image.skyward_source, 'local nodes use this copy; use "auto"')
    for include in image.includes:
        if not os.path.exists(include):
            raise fail("Image", "includes", include, "the path does not exist")


def _machine() -> str:
    """This machine's architecture as Spec names it ("x86_64" or "arm64")."""
    return {"aarch64": "arm64", "amd64": "x86_64"}.get(platform.machine().lower(), platform.machine().lower())
