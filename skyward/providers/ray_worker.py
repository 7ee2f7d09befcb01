"""Ray's worker process on a node skyward starts (``ray_start.lean``), less the serializers
Ray registers for libraries that a skyward worker never hands it.

Ray's serialization context, made as a process connects, registers serializers for
pydantic, starlette and pyarrow (``ray.util.serialization_addons.apply``), importing each
that is installed: 50-70 ms of CPU for pydantic alone, in every worker and in the driver,
on the busiest moment of a pool's open (skyward depends on starlette, so that one is
always there). A skyward process hands Ray no user object: tasks, arguments and results
travel as bytes of skyward's own wire (``engine/wire.py``). ``when_imported`` registers
them only in a process that has imported one of those libraries by then, where an
object of theirs could be on its way to Ray.

Run by the raylet in the place of Ray's ``default_worker.py`` (``python ray_worker.py
ARGS``), this runs that script as Ray ships it, with ``when_imported`` in place. Where
Ray has moved either, the worker runs as Ray's own. It imports the standard library
before Ray, and puts Ray's worker directory first on ``sys.path`` in the place of its own
(whose ``ray`` package is skyward's provider, not Ray).
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from collections.abc import Callable

ADDONS = ("pydantic", "starlette", "pyarrow")
"""The libraries Ray's serialization addons are for (top-level module names)."""
RAY_WORKER = "ray._private.workers.default_worker"


def when_imported(apply: Callable[[object], None]) -> Callable[[object], None]:
    """``apply`` (Ray's ``serialization_addons.apply``) for a process that has imported
    one of ``ADDONS``; nothing for one that has not."""

    def applied(context: object) -> None:
        if any(name in sys.modules for name in ADDONS):
            apply(context)

    return applied


def main() -> None:
    """Run Ray's worker script with this process's arguments, as the module says."""
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]
    spec = importlib.util.find_spec(RAY_WORKER)
    if spec is None or spec.origin is None:
        raise SystemExit(f"skyward's Ray worker: Ray's worker script ({RAY_WORKER}) is not there")
    sys.path.insert(0, os.path.dirname(spec.origin))
    try:
        from ray.util import serialization_addons
    except ImportError:  # Ray has moved it: its worker as it ships
        pass
    else:
        if callable(getattr(serialization_addons, "apply", None)):
            serialization_addons.apply = when_imported(serialization_addons.apply)
    runpy.run_path(spec.origin, run_name="__main__")


if __name__ == "__main__":
    main()
