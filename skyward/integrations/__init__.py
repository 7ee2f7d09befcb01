"""The older integration API: per-function decorators for distributed frameworks
(``sky.integrations.torch(...)`` & co., see ``decorators``) and joblib / scikit-learn on
a pool (``JoblibPool``, ``ScikitLearnPool``, ``joblib_backend``, ``sklearn_backend``, see
``pools``). The plugins (``sky.plugins.*``) are the newer form of both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyward.core.lazy import lazy_names

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from skyward.integrations.decorators import jax as jax
    from skyward.integrations.decorators import keras as keras
    from skyward.integrations.decorators import tensorflow as tensorflow
    from skyward.integrations.decorators import torch as torch
    from skyward.integrations.decorators import transformers as transformers
    from skyward.integrations.pools import JoblibPool as JoblibPool
    from skyward.integrations.pools import ScikitLearnPool as ScikitLearnPool
    from skyward.integrations.pools import joblib_backend as joblib_backend
    from skyward.integrations.pools import sklearn_backend as sklearn_backend

_LAZY = {
    "keras": "skyward.integrations.decorators",
    "torch": "skyward.integrations.decorators",
    "jax": "skyward.integrations.decorators",
    "tensorflow": "skyward.integrations.decorators",
    "transformers": "skyward.integrations.decorators",
    "JoblibPool": "skyward.integrations.pools",
    "ScikitLearnPool": "skyward.integrations.pools",
    "joblib_backend": "skyward.integrations.pools",
    "sklearn_backend": "skyward.integrations.pools",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_names(globals(), _LAZY)
