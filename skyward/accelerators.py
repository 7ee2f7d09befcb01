"""``skyward.accelerators``: the accelerator factories as a module of their own, so
``from skyward.accelerators import A100`` works as ``sky.accelerators.A100`` does (the
catalog and its factories live in ``skyward.core.accelerators``)."""

from skyward.core import accelerators as _catalog
from skyward.core.accelerators import *  # every factory of the catalog

__all__ = list(_catalog.__all__)
