"""``sky.metrics``: what each node measures about itself, and the sampler that does it.

Put collectors in ``sky.Image(metrics=[...])``; every node's agent then reads each one
every ``interval`` seconds and sends the value to the client as a ``sky.Metric`` event
(name and unit below). ``Image(metrics=sky.metrics.Default())`` is the default set and
``Image(metrics=None)`` turns sampling off. GPU collectors read NVML through
nvidia-ml-py and are skipped on nodes without it or without a GPU. Local nodes share
this machine, so they all report the machine's numbers.

=================  ====================  ======
collector          ``Metric.name``       unit
=================  ====================  ======
CPU                cpu                   %
Memory             memory                %
MemoryUsed         memory_used           MB
MemoryTotal        memory_total          MB
GPU                gpu                   %  (mean over the node's GPUs)
GPUMemory          gpu_memory            %
GPUMemoryTotal     gpu_memory_total      MB
GPUTemp            gpu_temp              C  (hottest GPU)
Disk(path)         disk:<path>           %  used
NetworkRx          network_rx            B/s
NetworkTx          network_tx            B/s
Custom(name, cmd)  <name>                last number the command prints
=================  ====================  ======
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import ClassVar

import psutil
from msgspec import Struct

from skyward.core.validation import check_number, fail
from skyward.observe import gpu
from skyward.observe.events import Error, Event, Metric

__all__ = [
    "CPU", "Collector", "Custom", "Default", "Disk", "GPU", "GPUMemory", "GPUMemoryTotal",
    "GPUTemp", "Memory", "MemoryTotal", "MemoryUsed", "NetworkRx", "NetworkTx",
]

Probe = Callable[[], float | None]
MB = 1024**2


class Collector:
    """Base of the metric factories: a ``name``, a ``unit``, an ``interval`` in seconds,
    and ``probe()``, which prepares reading on the node."""

    __slots__ = ()
    unit: ClassVar[str] = ""
    name: ClassVar[str]
    interval: float

    def probe(self) -> Probe | None:
        """A function returning one reading (None: no value this time), or None when the
        node cannot measure this at all. Raises ValueError for a collector that is
        misconfigured for this node."""
        raise NotImplementedError

    def __post_init__(self) -> None:
        """Check ``interval`` (run by each subclass, a frozen ``msgspec.Struct``; one with
        fields of its own checks them and then calls this); ValueError naming the class and
        the value."""
        check_number(type(self).__name__, "interval", self.interval, strictly_positive=True)


class CPU(Struct, Collector, frozen=True):
    """Machine-wide CPU use."""

    interval: float = 1.0
    unit: ClassVar[str] = "%"
    name: ClassVar[str] = "cpu"

    def probe(self) -> Probe:
        psutil.cpu_percent(None)
        return lambda: psutil.cpu_percent(None)


class Memory(Struct, Collector, frozen=True):
    """Memory in use, as a share of the total."""

    interval: float = 1.0
    unit: ClassVar[str] = "%"
    name: ClassVar[str] = "memory"

    def probe(self) -> Probe:
        return lambda: psutil.virtual_memory().percent


class MemoryUsed(Struct, Collector, frozen=True):
    """Memory in use (total minus available)."""

    interval: float = 1.0
    unit: ClassVar[str] = "MB"
    name: ClassVar[str] = "memory_used"

    def probe(self) -> Probe:
        def read() -> float:
            memory = psutil.virtual_memory()
            return (memory.total - memory.available) / MB

        return read


class MemoryTotal(Struct, Collector, frozen=True):
    """Physical memory."""

    interval: float = 60.0
    unit: ClassVar[str] = "MB"
    name: ClassVar[str] = "memory_total"

    def probe(self) -> Probe:
        return lambda: psutil.virtual_memory().total / MB


class GPU(Struct, Collector, frozen=True):
    """GPU utilisation, the mean over the node's GPUs."""

    interval: float = 1.0
    unit: ClassVar[str] = "%"
    name: ClassVar[str] = "gpu"

    def probe(self) -> Probe | None:
        return gpu.utilization if gpu.devices() else None


class GPUMemory(Struct, Collector, frozen=True):
    """GPU memory in use, as a share of all GPUs' memory."""

    interval: float = 1.0
    unit: ClassVar[str] = "%"
    name: ClassVar[str] = "gpu_memory"

    def probe(self) -> Probe | None:
        def read() -> float:
            used, total = gpu.memory()
            return 100.0 * used / total if total else 0.0

        return read if gpu.devices() else None


class GPUMemoryTotal(Struct, Collector, frozen=True):
    """Memory of all the node's GPUs."""

    interval: float = 60.0
    unit: ClassVar[str] = "MB"
    name: ClassVar[str] = "gpu_memory_total"

    def probe(self) -> Probe | None:
        return (lambda: gpu.memory()[1]) if gpu.devices() else None


class GPUTemp(Struct, Collector, frozen=True):
    """Temperature of the node's hottest GPU."""

    interval: float = 5.0
    unit: ClassVar[str] = "C"
    name: ClassVar[str] = "gpu_temp"

    def probe(self) -> Probe | None:
        return gpu.temperature if gpu.devices() else None


class Disk(Struct, Collector, frozen=True):
    """Space used on the file system holding ``path``."""

    path: str = "/"
    interval: float = 10.0
    unit: ClassVar[str] = "%"

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise fail("Disk", "path", self.path, "give a directory, e.g. sky.metrics.Disk(\"/data\")")
        Collector.__post_init__(self)

    @property
    def name(self) -> str:  # type: ignore[override]
        """``disk:<path>``."""
        return f"disk:{self.path}"

    def probe(self) -> Probe:
        if not os.path.exists(self.path):
            raise ValueError(f"sky.metrics.Disk({self.path!r}): the path does not exist on this node")
        return lambda: psutil.disk_usage(self.path).percent


class NetworkRx(Struct, Collector, frozen=True):
    """Bytes received per second, over all interfaces."""

    interval: float = 1.0
    unit: ClassVar[str] = "B/s"
    name: ClassVar[str] = "network_rx"

    def probe(self) -> Probe:
        return _rate(lambda: psutil.net_io_counters().bytes_recv)


class NetworkTx(Struct, Collector, frozen=True):
    """Bytes sent per second, over all interfaces."""

    interval: float = 1.0
    unit: ClassVar[str] = "B/s"
    name: ClassVar[str] = "network_tx"

    def probe(self) -> Probe:
        return _rate(lambda: psutil.net_io_counters().bytes_sent)


class Custom(Struct, Collector, frozen=True):
    """A shell ``command`` run on the node every ``interval`` seconds; the last number it
    prints is the value. A command that fails, prints no number or runs past its interval
    (and at least ``TIMEOUT_FLOOR`` seconds) is reported once as a ``sky.Error`` event and
    tried again at the next interval."""

    TIMEOUT_FLOOR: ClassVar[float] = 5.0
    """The least time a command gets: a shell's start on a loaded node can take a second."""

    name: str  # type: ignore[misc]  # the one collector whose name is the user's
    command: str
    interval: float = 3.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise fail("Custom", "name", self.name, "give the metric a name")
        if not isinstance(self.command, str) or not self.command.strip():
            raise fail("Custom", "command", self.command, "give a shell command that prints a number")
        Collector.__post_init__(self)

    def probe(self) -> Probe:
        def read() -> float:
            stdout, returncode = _run_shell(self.command, max(self.interval, self.TIMEOUT_FLOOR))
            words = stdout.split()
            if returncode != 0 or not words:
                raise ValueError(f"exit code {returncode}, output {stdout.strip()[-80:]!r}")
            try:
                return float(words[-1])
            except ValueError:
                raise ValueError(f"printed {words[-1]!r}, not a number") from None

        return read


def _run_shell(command: str, timeout: float) -> tuple[str, int]:
    """``command``'s output and exit code, run by the shell in a process group of its own;
    subprocess.TimeoutExpired once ``timeout`` seconds pass, the whole group killed (what
    the command started too, not only the shell)."""
    with subprocess.Popen(
        command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    ) as shell:
        try:
            stdout, _ = shell.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
            raise
    return stdout, shell.returncode


class Default(Struct, frozen=True):
    """The default set: CPU, Memory, GPU, GPUMemory and GPUTemp, every ``interval`` s."""

    interval: float = 1.0

    def __post_init__(self) -> None:
        check_number("Default", "interval", self.interval, strictly_positive=True)

    def collectors(self) -> tuple[Collector, ...]:
        """The collectors this stands for."""
        every = self.interval
        return (CPU(every), Memory(every), GPU(every), GPUMemory(every), GPUTemp(max(every, 5.0)))


def _rate(counter: Callable[[], int]) -> Probe:
    last = [counter(), time.monotonic()]

    def read() -> float | None:
        value, now = counter(), time.monotonic()
        elapsed = now - last[1]
        rate = (value - last[0]) / elapsed if elapsed > 0 else None
        last[:] = [value, now]
        return rate

    return read


def normalize(value: object) -> Default | tuple[Collector | Default, ...] | None:
    """Validate ``Image.metrics``: None, ``Default()``, one collector or several (a list
    becomes a tuple). Raises ValueError naming the bad item."""
    if value is None or isinstance(value, Default):
        return value
    if isinstance(value, Collector):
        return (value,)
    allowed = "use sky.metrics.Default(), a list of sky.metrics collectors such as [sky.metrics.CPU()], or None"
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise fail("Image", "metrics", value, allowed)
    items = tuple(value)
    for item in items:
        if not isinstance(item, (Collector, Default)):
            raise fail("Image", "metrics", value, f"{item!r} is not a collector; {allowed}")
    return items


def resolve(value: object) -> tuple[Collector, ...]:
    """The collectors ``Image.metrics`` stands for; a later collector replaces an earlier
    one with the same name (``[Default(), CPU(interval=0.2)]`` samples CPU faster)."""
    normalized = normalize(value)
    if normalized is None:
        return ()
    items = normalized.collectors() if isinstance(normalized, Default) else normalized
    by_name: dict[str, Collector] = {}
    for item in items:
        for collector in item.collectors() if isinstance(item, Default) else (item,):
            by_name[collector.name] = collector
    return tuple(by_name.values())


class MetricSampler:
    """A daemon thread that reads each collector every ``interval`` seconds (the first
    time at once) and hands ``Metric`` events to ``put``, while sampling is on (it starts
    on; ``sample(False)`` pauses it when nobody listens). A collector that raises is
    reported once as an ``Error`` event and kept; one the node cannot measure is skipped."""

    def __init__(self, collectors: Iterable[Collector], node: int, put: Callable[[Event], None]) -> None:
        self._collectors = tuple(collectors)
        self._node = node
        self._put = put
        self._stop = threading.Event()
        self._on = threading.Event()
        self._on.set()
        self._reported: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> MetricSampler:
        """Start sampling (nothing to do without collectors); returns self."""
        if self._collectors and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="skyward-metrics", daemon=True)
            self._thread.start()
        return self

    def sample(self, on: bool) -> None:
        """Resume (``on``) or pause sampling; a resumed sampler reads every collector at once."""
        if on:
            self._on.set()
        else:
            self._on.clear()

    def stop(self) -> None:
        """Stop the thread at its next wake-up."""
        self._stop.set()
        self._on.set()

    def _run(self) -> None:
        schedule: list[tuple[Collector, Probe]] = []
        for collector in self._collectors:
            try:
                probe = collector.probe()
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                self._report(collector, exc)
                continue
            if probe is not None:
                schedule.append((collector, probe))
        due = [time.monotonic()] * len(schedule)
        while schedule and not self._stop.is_set():
            if not self._on.is_set():
                self._on.wait()
                due = [time.monotonic()] * len(schedule)
                continue
            now = time.monotonic()
            for index, (collector, probe) in enumerate(schedule):
                if due[index] <= now:
                    self._read(collector, probe)
                    due[index] = max(due[index] + collector.interval, now)
            self._stop.wait(max(0.0, min(due) - time.monotonic()))

    def _read(self, collector: Collector, probe: Probe) -> None:
        try:
            value = probe()
        except Exception as exc:  # noqa: BLE001 - reported, sampling goes on
            self._report(collector, exc)
            return
        if value is not None:
            self._put(Metric(self._node, collector.name, float(value), collector.unit))

    def _report(self, collector: Collector, exc: Exception) -> None:
        if collector.name in self._reported:
            return
        self._reported.add(collector.name)
        self._put(Error(f"metric {collector.name}: {type(exc).__name__}: {exc} (reported once)", self._node))
