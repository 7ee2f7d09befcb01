"""sky.metrics factories, Image.metrics and the sampler (real psutil readings)."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

import skyward as sky
from skyward.observe import gpu
from skyward.observe.metrics import MetricSampler, resolve


def test_factories_have_names_units_and_default_intervals() -> None:
    m = sky.metrics
    assert (m.CPU().name, m.CPU().unit, m.CPU().interval) == ("cpu", "%", 1.0)
    assert m.Memory(interval=2).interval == 2
    assert m.Disk("/data").name == "disk:/data"
    assert m.Custom("queue", "echo 3").interval == 3.0
    assert m.Custom(name="q", command="echo 1", interval=0.5).name == "q"
    names = {c.name for c in resolve(m.Default())}
    assert names == {"cpu", "memory", "gpu", "gpu_memory", "gpu_temp"}
    assert [c.name for c in resolve([m.NetworkRx(), m.NetworkTx(), m.MemoryUsed(), m.MemoryTotal(),
                                     m.GPUMemoryTotal()])] == [
        "network_rx", "network_tx", "memory_used", "memory_total", "gpu_memory_total"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: sky.metrics.CPU(interval=0), "CPU.interval=0"),
        (lambda: sky.metrics.GPU(interval="fast"), "GPU.interval='fast'"),
        (lambda: sky.metrics.Disk(""), "Disk.path=''"),
        (lambda: sky.metrics.Custom("", "echo 1"), "Custom.name=''"),
        (lambda: sky.metrics.Custom("x", " "), "Custom.command=' '"),
        (lambda: sky.metrics.Default(interval=-1), "Default.interval=-1"),
        (lambda: sky.Image(metrics="cpu"), "Image.metrics='cpu'"),
        (lambda: sky.Image(metrics=[sky.metrics.CPU(), "gpu"]), "'gpu' is not a collector"),
    ],
)
def test_bad_metric_settings_name_field_and_value(build, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_image_metrics_default_list_and_off() -> None:
    assert sky.Image().metrics == sky.metrics.Default()
    assert sky.Image(metrics=None).metrics is None
    assert resolve(sky.Image(metrics=None).metrics) == ()
    image = sky.Image(metrics=[sky.metrics.CPU(), sky.metrics.Disk("/")])
    assert image.metrics == (sky.metrics.CPU(), sky.metrics.Disk("/"))
    assert sky.Image(metrics=sky.metrics.GPU()).metrics == (sky.metrics.GPU(),)


def test_a_later_collector_replaces_an_earlier_one_with_the_same_name() -> None:
    collectors = resolve([sky.metrics.Default(), sky.metrics.CPU(interval=0.2)])
    cpu = [c for c in collectors if c.name == "cpu"]
    assert cpu == [sky.metrics.CPU(interval=0.2)]


def test_sampler_reads_each_collector_at_its_interval() -> None:
    events: list[object] = []
    sampler = MetricSampler(
        [sky.metrics.CPU(interval=0.1), sky.metrics.Memory(interval=0.2), sky.metrics.NetworkRx(interval=0.1),
         sky.metrics.Custom("answer", "echo the answer is 42", interval=0.2)],
        node=3, put=events.append,
    ).start()
    time.sleep(1.05)
    sampler.stop()
    metrics = [e for e in events if isinstance(e, sky.Metric)]
    by_name: dict[str, list[sky.Metric]] = {}
    for metric in metrics:
        by_name.setdefault(metric.name, []).append(metric)
    assert {m.node for m in metrics} == {3}
    assert 0 < by_name["memory"][0].value <= 100 and by_name["memory"][0].unit == "%"
    assert by_name["network_rx"][0].unit == "B/s" and by_name["network_rx"][0].value >= 0
    assert {m.value for m in by_name["answer"]} == {42.0}
    # Each at its own interval: never sooner, and mostly on time. A reading may come late
    # when the machine is busy (one thread reads them all, the custom one a subprocess);
    # the next is not hurried to catch up.
    for name, interval, most in (("cpu", 0.1, 11), ("memory", 0.2, 6)):
        gaps = [b.timestamp - a.timestamp for a, b in zip(by_name[name], by_name[name][1:])]
        assert len(gaps) >= 3 and len(by_name[name]) <= most, (name, gaps)  # cpu's first reading primes psutil
        assert min(gaps) >= 0.9 * interval and statistics.median(gaps) <= 1.5 * interval, (name, gaps)


def test_sampler_reports_a_failing_collector_once_and_keeps_the_others() -> None:
    events: list[object] = []
    sampler = MetricSampler(
        [sky.metrics.Custom("broken", "exit 3", interval=0.05), sky.metrics.Custom("words", "echo no", interval=0.05),
         sky.metrics.Disk("/no/such/dir"), sky.metrics.Memory(interval=0.05)],
        node=1, put=events.append,
    ).start()
    time.sleep(0.4)
    sampler.stop()
    errors = [e.message for e in events if isinstance(e, sky.Error)]
    assert len(errors) == 3
    assert any("broken" in m and "exit code 3" in m for m in errors)
    assert any("words" in m and "'no', not a number" in m for m in errors)
    assert any("/no/such/dir" in m and "does not exist" in m for m in errors)
    assert {e.name for e in events if isinstance(e, sky.Metric)} == {"memory"}


def test_gpu_collectors_are_skipped_cleanly_without_a_gpu() -> None:
    if gpu.devices():
        pytest.skip("this machine has a GPU: the skip path does not apply")
    events: list[object] = []
    sampler = MetricSampler(
        [sky.metrics.GPU(interval=0.05), sky.metrics.GPUMemory(interval=0.05), sky.metrics.GPUTemp(interval=0.05),
         sky.metrics.GPUMemoryTotal(interval=0.05)],
        node=0, put=events.append,
    ).start()
    time.sleep(0.2)
    sampler.stop()
    assert events == []


def test_gpu_metrics_are_read_when_a_gpu_exists() -> None:
    if not gpu.devices():
        pytest.skip("no NVIDIA GPU with NVML (nvidia-ml-py) on this machine")
    events: list[object] = []
    sampler = MetricSampler([sky.metrics.GPU(interval=0.1), sky.metrics.GPUMemoryTotal(interval=0.1)], 0,
                            events.append).start()
    time.sleep(0.35)
    sampler.stop()
    names = {e.name for e in events if isinstance(e, sky.Metric)}
    assert names == {"gpu", "gpu_memory_total"}


def test_a_sampler_without_collectors_starts_no_thread() -> None:
    before = threading.active_count()
    MetricSampler([], 0, print).start()
    assert threading.active_count() <= before


def test_a_custom_command_gets_at_least_the_floor_and_is_stopped_with_what_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A slow start on a loaded node is not a failure: the command has its interval or
    ``TIMEOUT_FLOOR`` seconds, whichever is longer. After that it is stopped, and so is
    every process it started."""
    assert sky.metrics.Custom.TIMEOUT_FLOOR == 5.0
    assert sky.metrics.Custom("slow", "sleep 1.5; echo 7", interval=0.05).probe()() == 7.0  # past 1 s, within 5
    monkeypatch.setattr(sky.metrics.Custom, "TIMEOUT_FLOOR", 0.2)
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        sky.metrics.Custom("stuck", f"sh -c 'echo $$ > {pid_file}; exec sleep 30'; echo 7", interval=0.05).probe()()
    assert time.monotonic() - started < 5.0
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 5.0
    while _running(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(sleeper), "the command's own child outlived it"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
