"""What to provision and how to run it: ``Spec``, ``Nodes``, ``Worker`` and ``Options``
(the ``Image`` is ``skyward.image.image``). All are frozen dataclasses that validate on construction:
a bad value raises ValueError naming the field, the value and what is allowed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, runtime_checkable

from skyward.core.accelerators import Accelerator
from skyward.core.allocation import normalize as normalize_allocation
from skyward.core.health import HealthChecker
from skyward.core.validation import check_choice, check_number, fail, reject_unknown
from skyward.image.image import Image
from skyward.model.plugin import Plugin, check_plugins
from skyward.observe.log_config import LogConfig

if TYPE_CHECKING:
    from skyward.storage.volume import Volume

AllocationStrategy = Literal["spot-if-available", "spot", "on-demand", "cheapest"]
SelectionStrategy = Literal["cheapest", "first", "available"]
ConsoleMode = Literal["rich", "minimal", "log", "silent"]
Architecture = Literal["x86_64", "arm64"]
Executor = Literal["auto", "thread", "process"]

SELECTIONS = ("cheapest", "first", "available")
CONSOLE_MODES = ("rich", "minimal", "log", "silent")
EXECUTORS = ("auto", "thread", "process")
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
    and wake on demand (a remote pool then runs without collections:
    ``Options(cluster=False)``). ``max``: the most it grows to while tasks wait (the
    ceiling). Unset, ``min`` and ``max`` are ``desired``: a fixed pool. ``desired=0`` is a lazy
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


NodeSpec = int | tuple[int, int] | Nodes
"""What ``Spec.nodes`` takes: a count, ``(low, high)`` for an elastic pool, or ``Nodes``."""


@dataclass(frozen=True, slots=True)
class Spec:
    """One way to get the pool's nodes: a provider plus the hardware and image wanted.
    An unknown keyword is a TypeError naming the closest field."""

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        reject_unknown("Spec", kwargs, cls.__dataclass_fields__, "fields")
        return object.__new__(cls)

    provider: Any
    accelerator: Accelerator | None = None
    nodes: NodeSpec = 1
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
        if not (type(self.volumes) is tuple and not self.volumes):  # storage loads for a pool with volumes
            from skyward.storage.volume import check_volumes

            object.__setattr__(self, "volumes", check_volumes("Spec", "volumes", self.volumes))
        object.__setattr__(self, "plugins", check_plugins(self.plugins))
        if self.instance_type is not None and (not isinstance(self.instance_type, str) or not self.instance_type.strip()):
            raise fail("Spec", "instance_type", self.instance_type, 'give the provider\'s machine type, e.g. "p5.48xlarge"')

    @property
    def node_count(self) -> Nodes:
        """``nodes`` as ``Nodes`` (always normalised by the constructor)."""
        assert isinstance(self.nodes, Nodes)
        return self.nodes

    def non_defaults(self) -> dict[str, object]:
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

    ``keep_alive``: seconds the pool is kept, by this user's pool daemon, after the last
    script using it left; a later script whose pool is defined the same adopts it instead
    of opening a new one (docs/kept-pools.md). None (the default): the pool closes with
    its ``with`` block.

    ``dashboard``: serve the live web dashboard of this pool from this process while it
    is open (on 127.0.0.1; a one-time link to it is printed on stderr once the pool is
    open; docs/dashboard.md). Kept pools have the pool daemon's too (``sky dashboard``).

    ``default_compute_timeout`` and ``shutdown_timeout`` may be ``math.inf`` (no limit);
    the provisioning timeouts must be finite. NaN is refused everywhere. An unknown
    keyword is a TypeError naming the closest field."""

    def __new__(cls, *args: object, **kwargs: object) -> Self:
        reject_unknown("Options", kwargs, cls.__dataclass_fields__, "fields")
        return object.__new__(cls)

    selection: str | Callable[[tuple[Spec, ...]], Spec | Sequence[Spec]] = "cheapest"
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
    keep_alive: float | None = None
    dashboard: bool = False

    def __post_init__(self) -> None:
        check_number("Options", "keep_alive", self.keep_alive, strictly_positive=True, optional=True, finite=True)
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
        if not isinstance(self.dashboard, bool):
            raise fail("Options", "dashboard", self.dashboard, "use True (serve the pool's web dashboard) or False")
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
        """A copy with some fields changed (each checked as the constructor checks it)."""
        return replace(self, **changes)


OPTION_FIELDS = tuple(f.name for f in fields(Options))
