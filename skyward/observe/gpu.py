"""GPU readings through NVML (the ``nvidia-ml-py`` package).

NVML is used only where both the package and an NVIDIA driver with at least one GPU
exist; ``devices()`` is empty everywhere else, so GPU metrics are skipped cleanly.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

_log = logging.getLogger("skyward.metrics")
_lock = threading.Lock()
_state: dict[str, Any] = {}


def devices() -> list[Any]:
    """NVML handles of this machine's GPUs (initialising NVML once); [] without any."""
    with _lock:
        if "handles" not in _state:
            _state["handles"] = _open()
        return list(_state["handles"])


def _open() -> list[Any]:
    try:
        import pynvml
    except ImportError:
        _log.debug("GPU metrics off: nvidia-ml-py is not installed")
        return []
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        _state["nvml"] = pynvml
        return [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(count)]
    except Exception as exc:  # NVMLError: no driver or no device
        _log.debug("GPU metrics off: NVML unavailable (%s)", exc)
        return []


def utilization() -> float:
    """Mean GPU utilisation over the GPUs, in percent."""
    nvml = _state["nvml"]
    values = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in devices()]
    return sum(values) / len(values)


def memory() -> tuple[float, float]:
    """(used, total) GPU memory over all GPUs, in MB."""
    nvml = _state["nvml"]
    infos = [nvml.nvmlDeviceGetMemoryInfo(h) for h in devices()]
    return sum(i.used for i in infos) / 1024**2, sum(i.total for i in infos) / 1024**2


def temperature() -> float:
    """The hottest GPU's temperature, in degrees Celsius."""
    nvml = _state["nvml"]
    return float(max(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU) for h in devices()))
