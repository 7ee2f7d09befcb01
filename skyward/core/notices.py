"""Notices of other libraries that say nothing to a skyward user, left out.

Imported in a Jupyter kernel, Ray tells the user twice to install ipywidgets: tqdm's
``TqdmWarning: IProgress not found`` (Ray imports ``tqdm.auto``) and an INFO line of
``ray.widgets.util`` ("Missing packages: ['ipywidgets']"). Both are about Ray's own
notebook widgets, which skyward never shows; its progress bars need no ipywidgets."""

from __future__ import annotations

import logging
import sys
import warnings


def quiet_in_notebooks() -> None:
    """In a Jupyter kernel (ipykernel loaded), leave those two notices out; elsewhere,
    nothing changes."""
    if "ipykernel" not in sys.modules:
        return
    warnings.filterwarnings("ignore", message="IProgress not found", module=r"tqdm\.auto")
    logging.getLogger("ray.widgets.util").setLevel(logging.WARNING)
