"""The older integration API: per-function decorators for distributed frameworks
(``sky.integrations.torch(...)`` & co., see ``decorators``) and joblib / scikit-learn on
a pool (``JoblibPool``, ``ScikitLearnPool``, ``joblib_backend``, ``sklearn_backend``, see
``pools``). The plugins (``sky.plugins.*``) are the newer form of both."""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skyward.integrations' has no attribute {name!r}")
