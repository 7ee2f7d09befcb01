"""GPU readings through NVML (the ``nvidia-ml-py`` package).

NVML is used only where both the package and an NVIDIA driver with at least one GPU
exist; ``devices()`` is empty everywhere else, so GPU metrics are skipped cleanly.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType

_log = logging.getLogger("skyward.metrics")
_lock = threading.Lock()
_handles: list[object] | None = None
"""NVML's opaque device handles, once NVML was asked (None: not yet)."""
_nvml: ModuleType | None = None
"""The ``pynvml`` module, once NVML is initialised."""


def devices() -> list[object]:
    """NVML handles of this machine's GPUs (initialising NVML once); [] without any."""
    global _handles
    with _lock:
        if _handles is None:
            _handles = _open()
        return list(_handles)


def _open() -> list[object]:
    global _nvml
    try:
        import pynvml
    except ImportError:
        _log.debug("GPU metrics off: nvidia-ml-py is not installed")
        return []
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        _nvml = pynvml
        return [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(count)]
    except Exception as exc:  # NVMLError: no driver or no device
        _log.debug("GPU metrics off: NVML unavailable (%s)", exc)
        return []


def _library() -> ModuleType:
    """``pynvml``, initialised; RuntimeError if NVML is not (there is no GPU to read)."""
    if _nvml is None:
        raise RuntimeError("NVML is not initialised: this machine has no GPU that NVML can read")
    return _nvml


def utilization() -> float:
    """Mean GPU utilisation over the GPUs, in percent."""
    nvml = _library()
    values = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in devices()]
    return sum(values) / len(values)


def memory() -> tuple[float, float]:
    """(used, total) GPU memory over all GPUs, in MB."""
    nvml = _library()
    infos = [nvml.nvmlDeviceGetMemoryInfo(h) for h in devices()]
    return sum(i.used for i in infos) / 1024**2, sum(i.total for i in infos) / 1024**2


def temperature() -> float:
    """The hottest GPU's temperature, in degrees Celsius."""
    nvml = _library()
    return float(max(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU) for h in devices()))
