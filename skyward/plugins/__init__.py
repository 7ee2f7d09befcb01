"""Framework plugins: ``Spec(plugins=[sky.plugins.torch(), ...])``.

``Plugin`` is a named set of hooks (see ``skyward.model.plugin``); the built-ins are
factories returning one. Everything here is imported on first use, so a node process
that only installs its pool's plugins does not import the frameworks' modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward.core.lazy import lazy_names

if TYPE_CHECKING:  # what the names are, for type checkers (imported on first use)
    from skyward.model.cluster import Cluster as Cluster
    from skyward.model.plugin import LaunchCommand as LaunchCommand
    from skyward.model.plugin import LaunchContext as LaunchContext
    from skyward.model.plugin import Plugin as Plugin
    from skyward.plugins.accelerate_launch import accelerate as accelerate
    from skyward.plugins.jax_dist import jax as jax
    from skyward.plugins.joblib_pool import joblib as joblib
    from skyward.plugins.joblib_pool import sklearn as sklearn
    from skyward.plugins.keras_backend import keras as keras
    from skyward.plugins.nvidia import cuml as cuml
    from skyward.plugins.nvidia import mig as mig
    from skyward.plugins.nvidia import mps as mps
    from skyward.plugins.torch_dist import torch as torch

_LAZY = {
    "Plugin": "skyward.model.plugin",
    "LaunchCommand": "skyward.model.plugin",
    "LaunchContext": "skyward.model.plugin",
    "Cluster": "skyward.model.cluster",
    "torch": "skyward.plugins.torch_dist",
    "jax": "skyward.plugins.jax_dist",
    "keras": "skyward.plugins.keras_backend",
    "accelerate": "skyward.plugins.accelerate_launch",
    "joblib": "skyward.plugins.joblib_pool",
    "sklearn": "skyward.plugins.joblib_pool",
    "cuml": "skyward.plugins.nvidia",
    "mig": "skyward.plugins.nvidia",
    "mps": "skyward.plugins.nvidia",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(globals(), _LAZY)
