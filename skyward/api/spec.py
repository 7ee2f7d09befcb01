"""What to provision and how to run it: ``Spec``, ``Nodes``, ``Image``, ``PipIndex``,
``Worker`` and ``Options``. All are frozen dataclasses that validate on construction:
a bad value raises ValueError naming the field, the value and what is allowed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Protocol, runtime_checkable

from skyward.api.accelerators import Accelerator
from skyward.api.allocation import normalize as normalize_allocation
from skyward.api.health import HealthChecker
from skyward.api.validation import (
    as_str_tuple,
    as_tuple,
    check_choice,
    check_number,
    check_str_dict,
    fail,
)
from skyward.observe.log_config import LogConfig
from skyward.observe.metrics import Default
from skyward.observe.metrics import normalize as normalize_metrics
from skyward.plugins.plugin import Plugin, check_plugins
from skyward.storage.volume import Volume, check_volumes

AllocationStrategy = Literal["spot-if-available", "spot", "on-demand", "cheapest"]
SelectionStrategy = Literal["cheapest", "first", "available"]
ConsoleMode = Literal["rich", "minimal", "log", "silent"]
Architecture = Literal["x86_64", "arm64"]
Executor = Literal["auto", "thread", "process"]

SELECTIONS = ("cheapest", "first", "available")
CONSOLE_MODES = ("rich", "minimal", "log", "silent")
EXECUTORS = ("auto", "thread", "process")
SKYWARD_SOURCES = ("auto", "local", "github", "pypi")
DEFAULT_TTL = 600
MAX_NODES = 10_000
"""The most nodes one pool may ask for; a larger count is almost always a typo."""


@runtime_checkable
class ProviderConfig(Protocol):
    """A provider configuration (``sky.Local()``, ...): knows how to start a cluster."""

    name: str


@dataclass(frozen=True, slots=True)
class Nodes:
    """How many nodes. ``desired``: the count the pool opens toward and resizes to.
    ``min``: the fewest it runs with (the floor): the pool is usable once ``min`` nodes
    are up and keeps growing to ``desired``; idle nodes above the floor are released
    after ``Options.autoscale_idle_timeout``. ``min=0`` lets the pool idle with no node
    and wake on demand. ``max``: the most it grows to while tasks wait (the ceiling).
    Unset, ``min`` and ``max`` are ``desired``: a fixed pool. ``desired=0`` is a lazy
    start: the pool opens with no node and the first task starts them (up to ``max``,
    one node when ``max`` is unset)."""

    desired: int
    max: int | None = None
    min: int | None = None

    def __post_init__(self) -> None:
        check_number("Nodes", "desired", self.desired, minimum=0, maximum=MAX_NODES, integer=True)
        check_number("Nodes", "min", self.min, minimum=0, maximum=MAX_NODES, integer=True, optional=True)
        check_number("Nodes", "max", self.max, minimum=1, maximum=MAX_NODES, integer=True, optional=True)
        if self.min is not None and self.min > self.desired:
            raise fail("Nodes", "min", self.min, f"it must be <= desired ({self.desired})")
        if self.max is not None and self.max < self.desired:
            raise fail("Nodes", "max", self.max, f"it must be >= desired ({self.desired})")

    @classmethod
    def of(cls, spec: int | tuple[int, int] | Nodes) -> Nodes:
        """Normalise ``4``, ``(2, 8)`` or ``Nodes(...)`` into ``Nodes``."""
        if isinstance(spec, Nodes):
            return spec
        if isinstance(spec, bool):
            raise fail("Spec", "nodes", spec, "use an int, a (low, high) tuple or sky.Nodes(...)")
        if isinstance(spec, int):
            check_number("Spec", "nodes", spec, minimum=1, maximum=MAX_NODES, integer=True)
            return cls(desired=spec)
        if isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(v, int) for v in spec):
            return cls(desired=spec[0], max=spec[1])
        raise fail("Spec", "nodes", spec, "use an int, a (low, high) tuple or sky.Nodes(...)")

    @property
    def floor(self) -> int:
        """The fewest nodes: how many must be up before the pool is usable, and the
        least it scales down to (``min``, else ``desired``)."""
        return self.desired if self.min is None else self.min

    @property
    def ceiling(self) -> int:
        """The most nodes the pool grows to (``max``, else ``desired``; a lazy pool of
        ``desired=0`` without ``max`` grows to one node)."""
        return max(self.desired, 1) if self.max is None else self.max

    @property
    def elastic(self) -> bool:
        """True when the node count may change while the pool runs (a floor below
        ``desired`` or a ceiling above it)."""
        return self.floor < self.desired or self.ceiling > self.desired


@dataclass(frozen=True, slots=True)
class PipIndex:
    """A package index used only for the listed packages."""

    url: str
    packages: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or "://" not in self.url:
            raise fail("PipIndex", "url", self.url, "give the index URL, e.g. https://host/simple")
        object.__setattr__(self, "packages", as_str_tuple("PipIndex", "packages", self.packages))


def local_python() -> str:
    """This interpreter's ``major.minor``."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True, slots=True)
class Image:
    """The environment on each node: Python version, packages, env vars, shipped code."""

    python: str = "auto"
    pip: tuple[str, ...] = ()
    pip_indexes: tuple[PipIndex, ...] = ()
    apt: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    shell_vars: dict[str, str] = field(default_factory=dict)
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    skyward_source: str = "auto"
    metrics: Any = Default()
    bootstrap_timeout: int = 300
    pip_extra_index_url: str | None = None
    """The older reference's extra index for every package: becomes a ``PipIndex`` with
    no packages in ``pip_indexes``."""

    def __post_init__(self) -> None:
        if not isinstance(self.python, str) or not (
            self.python == "auto" or _is_minor_version(self.python)
        ):
            raise fail("Image", "python", self.python, 'use "auto" or a version like "3.11"')
        for name in ("pip", "apt", "includes", "excludes"):
            object.__setattr__(self, name, as_str_tuple("Image", name, getattr(self, name)))
        indexes = as_tuple("Image", "pip_indexes", self.pip_indexes, "[sky.PipIndex(url=..., packages=[...])]")
        for index in indexes:
            if not isinstance(index, PipIndex):
                raise fail("Image", "pip_indexes", index, "use sky.PipIndex(url=..., packages=[...])")
        if self.pip_extra_index_url is not None:
            if not isinstance(self.pip_extra_index_url, str) or "://" not in self.pip_extra_index_url:
                raise fail("Image", "pip_extra_index_url", self.pip_extra_index_url, "give the index URL, e.g. https://host/simple")
            if not any(index.url == self.pip_extra_index_url for index in indexes):
                indexes += (PipIndex(self.pip_extra_index_url),)
        object.__setattr__(self, "pip_indexes", indexes)
        object.__setattr__(self, "env", check_str_dict("Image", "env", self.env))
        object.__setattr__(self, "shell_vars", check_str_dict("Image", "shell_vars", self.shell_vars))
        check_choice("Image", "skyward_source", self.skyward_source, SKYWARD_SOURCES)
        object.__setattr__(self, "metrics", normalize_metrics(self.metrics))
        check_number("Image", "bootstrap_timeout", self.bootstrap_timeout, strictly_positive=True, finite=True)

    @property
    def python_version(self) -> str:
        """The concrete ``major.minor`` ("auto" resolves to this interpreter's)."""
        return local_python() if self.python == "auto" else self.python

    def content_hash(self) -> str:
        """12 hex digits that change whenever what a node installs or sets for this Image
        changes (Python, packages, indexes, apt, env, shell_vars, includes, excludes)."""
        import hashlib
        import json

        content = {
            "python": self.python_version, "pip": self.pip, "apt": sorted(self.apt), "env": sorted(self.env.items()),
            "indexes": [(index.url, index.packages) for index in self.pip_indexes],
            "shell_vars": sorted(self.shell_vars.items()), "includes": self.includes, "excludes": self.excludes,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    def bootstrap(self, ttl: int = 0) -> str:
        """The idempotent bash script that prepares a node for this Image (as pools run
        it; ``skyward.whl`` stands for the wheel a pool ships). With ``ttl`` seconds the
        machine also schedules its own shutdown that far ahead (its dead-man switch)."""
        import math

        from skyward.providers.ssh.image_script import Artifacts, render

        check_number("Image.bootstrap", "ttl", ttl, minimum=0, integer=True)
        script = render(self, Artifacts("skyward.whl", self.content_hash(), None, ""), "/tmp/skyward-bootstrap",
                        self.bootstrap_timeout)
        if ttl:
            halt = f"shutdown -h +{max(1, math.ceil(ttl / 60))} 'skyward: ttl' || true\n"
            script = script.replace("\n", "\n" + halt, 1)
        return script


def _is_minor_version(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


@dataclass(frozen=True, slots=True)
class Worker:
    """Task slots per node: ``concurrency`` running plus ``buffer`` queued on the node."""

    concurrency: int = 1
    buffer: int = 0
    executor: str = "auto"
    reuse_processes: bool = True

    def __post_init__(self) -> None:
        check_number("Worker", "concurrency", self.concurrency, minimum=1, integer=True)
        check_number("Worker", "buffer", self.buffer, minimum=0, integer=True)
        check_choice("Worker", "executor", self.executor, EXECUTORS)
        if not isinstance(self.reuse_processes, bool):
            raise fail("Worker", "reuse_processes", self.reuse_processes, "use True or False")
        if not self.reuse_processes and self.resolved_executor != "process":
            raise fail(
                "Worker", "reuse_processes", False, 'it only applies to executor="process"; set that too'
            )

    @property
    def resolved_executor(self) -> str:
        """"auto" means "thread"."""
        return "thread" if self.executor == "auto" else self.executor

    @property
    def slots(self) -> int:
        """Tasks a node accepts at once (running + buffered)."""
        return self.concurrency + self.buffer


@dataclass(frozen=True, slots=True)
class Spec:
    """One way to get the pool's nodes: a provider plus the hardware and image wanted."""

    provider: Any
    accelerator: Accelerator | None = None
    nodes: int | tuple[int, int] | Nodes = 1
    vcpus: float | None = None
    memory_gb: float | None = None
    disk_gb: int | None = None
    architecture: str | None = None
    allocation: str | float = "spot-if-available"
    image: Image = field(default_factory=Image)
    region: str | None = None
    max_hourly_cost: float | None = None
    ttl: int = DEFAULT_TTL
    volumes: tuple[Volume, ...] = ()
    plugins: tuple[Plugin, ...] = ()
    instance_type: str | None = None
    """A provider's own machine type to use as it is ("p5.48xlarge"), instead of choosing
    one from the hardware fields; only ``sky.AWS`` honours it, the others refuse it."""

    def __post_init__(self) -> None:
        if isinstance(self.provider, type):
            raise fail(
                "Spec", "provider", self.provider,
                f"pass an instance, not the class: sky.{self.provider.__name__}()",
            )
        if not isinstance(self.provider, ProviderConfig):
            raise fail("Spec", "provider", self.provider, "use a provider such as sky.Local()")
        if self.accelerator is not None and not isinstance(self.accelerator, Accelerator):
            raise fail(
                "Spec", "accelerator", self.accelerator,
                "use an accelerator object such as sky.accelerators.A100(), not a string",
            )
        object.__setattr__(self, "nodes", Nodes.of(self.nodes))
        check_number("Spec", "vcpus", self.vcpus, strictly_positive=True, optional=True, finite=True)
        check_number("Spec", "memory_gb", self.memory_gb, strictly_positive=True, optional=True, finite=True)
        check_number("Spec", "disk_gb", self.disk_gb, strictly_positive=True, integer=True, optional=True)
        if self.architecture is not None:
            check_choice("Spec", "architecture", self.architecture, ("x86_64", "arm64"))
        object.__setattr__(self, "allocation", normalize_allocation(self.allocation))
        if not isinstance(self.image, Image):
            raise fail("Spec", "image", self.image, "use sky.Image(...)")
        check_number("Spec", "max_hourly_cost", self.max_hourly_cost, strictly_positive=True, optional=True)
        if self.region is not None and (not isinstance(self.region, str) or not self.region):
            raise fail("Spec", "region", self.region, 'use a region name such as "us-east-1", or None')
        check_number("Spec", "ttl", self.ttl, minimum=0, integer=True)
        object.__setattr__(self, "volumes", check_volumes("Spec", "volumes", self.volumes))
        object.__setattr__(self, "plugins", check_plugins(self.plugins))
        if self.instance_type is not None and (not isinstance(self.instance_type, str) or not self.instance_type.strip()):
            raise fail("Spec", "instance_type", self.instance_type, 'give the provider\'s machine type, e.g. "p5.48xlarge"')

    @property
    def node_count(self) -> Nodes:
        """``nodes`` as ``Nodes`` (always normalised by the constructor)."""
        assert isinstance(self.nodes, Nodes)
        return self.nodes

    def non_defaults(self) -> dict[str, Any]:
        """Fields set to something other than their default (provider excluded)."""
        default = Spec(provider=self.provider)
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "provider" and getattr(self, f.name) != getattr(default, f.name)
        }


SPEC_FIELDS = tuple(f.name for f in fields(Spec))


@dataclass(frozen=True, slots=True)
class Options:
    """How the pool behaves: selection, worker slots, timeouts, console, logging, cluster,
    and the life of its nodes (docs/elastic.md): ``autoscale_cooldown`` (seconds between
    scaling in opposite directions), ``autoscale_idle_timeout`` (seconds a node sits idle
    before it may leave), ``reconcile_tick_interval`` (seconds between comparisons of the
    nodes wanted and those there), ``retry_on_interruption`` (runs again of a request
    whose node was lost to the infrastructure) and ``health_checker``.

    ``default_compute_timeout`` and ``shutdown_timeout`` may be ``math.inf`` (no limit);
    the provisioning timeouts must be finite. NaN is refused everywhere."""

    selection: str | Callable[..., Any] = "cheapest"
    worker: Worker | None = None
    provision_timeout: int | None = None
    ssh_timeout: int | None = None
    bootstrap_timeout: int | None = None
    provision_retry_delay: float | None = None
    max_provision_attempts: int | None = None
    ssh_retry_interval: int | None = None
    default_compute_timeout: float = 300.0
    autoscale_cooldown: float = 30.0
    autoscale_idle_timeout: float = 60.0
    reconcile_tick_interval: float = 15.0
    shutdown_timeout: float = 120.0
    console: bool | str = True
    logging: LogConfig | bool = True
    cluster: bool | None = None
    retry_on_interruption: int = 3
    health_checker: HealthChecker | None = None

    def __post_init__(self) -> None:
        if not callable(self.selection):
            check_choice("Options", "selection", self.selection, SELECTIONS)
        if self.worker is not None and not isinstance(self.worker, Worker):
            raise fail("Options", "worker", self.worker, "use sky.Worker(...)")
        for name in ("provision_timeout", "ssh_timeout", "bootstrap_timeout", "ssh_retry_interval"):
            check_number("Options", name, getattr(self, name), strictly_positive=True, optional=True, finite=True)
        check_number(
            "Options", "provision_retry_delay", self.provision_retry_delay, minimum=0, optional=True, finite=True
        )
        check_number(
            "Options", "max_provision_attempts", self.max_provision_attempts, minimum=1, integer=True, optional=True
        )
        for name in ("autoscale_cooldown", "autoscale_idle_timeout", "reconcile_tick_interval"):
            check_number("Options", name, getattr(self, name), strictly_positive=True, finite=True)
        for name in ("default_compute_timeout", "shutdown_timeout"):  # math.inf: no limit
            check_number("Options", name, getattr(self, name), strictly_positive=True)
        if not isinstance(self.console, bool):
            check_choice("Options", "console", self.console, (True, False, *CONSOLE_MODES))
        if not isinstance(self.logging, (bool, LogConfig)):
            raise fail("Options", "logging", self.logging, "use True, False or sky.LogConfig(...)")
        if self.cluster is not None and not isinstance(self.cluster, bool):
            raise fail("Options", "cluster", self.cluster, "use None, True or False")
        check_number("Options", "retry_on_interruption", self.retry_on_interruption, minimum=0, integer=True)
        if self.health_checker is not None and not isinstance(self.health_checker, HealthChecker):
            raise fail(
                "Options", "health_checker", self.health_checker,
                "use sky.HealthChecker(check=fn, interval=..., failures=..., warmup=...) or None",
            )

    @property
    def resolved_worker(self) -> Worker:
        """``worker`` or the default ``Worker()``."""
        return self.worker or Worker()

    @property
    def collections_enabled(self) -> bool:
        """Distributed collections are on unless ``cluster=False``."""
        return self.cluster is not False

    def with_(self, **changes: Any) -> Options:
        """A copy with some fields changed."""
        return replace(self, **changes)


OPTION_FIELDS = tuple(f.name for f in fields(Options))
