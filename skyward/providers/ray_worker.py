"""Ray's worker process on a node skyward starts (``ray_start.lean``), less the serializers
Ray registers for libraries that a skyward worker never hands it.

Ray's serialization context, made as a process connects, registers serializers for
pydantic, starlette and pyarrow (``ray.util.serialization_addons.apply``), importing each
that is installed: 50-70 ms of CPU for pydantic alone, in every worker and in the driver,
on the busiest moment of a pool's open (skyward depends on starlette, so that one is
always there). A skyward process hands Ray no user object: tasks, arguments and results
travel as bytes of skyward's own wire (``engine/wire.py``). ``when_imported`` registers
them only in a process that has imported one of those libraries by then, where an
object of theirs could be on its way to Ray. What that leaves out: a task that calls
Ray's own API on its pool's private Ray with such an object, having imported its library
only after the worker started (a pool's Ray is skyward's implementation detail).

Run by the raylet in the place of Ray's ``default_worker.py`` (``python ray_worker.py
ARGS``), this runs that script as Ray ships it, with ``when_imported`` in place; where
Ray has moved ``serialization_addons``, the worker runs as Ray's own. Before importing
anything else it takes its own folder off ``sys.path`` (Python puts it first, and its
``ray`` package is skyward's provider, not Ray), and puts Ray's worker folder there, as
a run of Ray's script would.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # before any import that could find skyward/providers/ray as Ray
    _here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != _here]

import importlib.util  # noqa: E402 - after the path is made safe
import runpy  # noqa: E402
from collections.abc import Callable  # noqa: E402
from types import ModuleType  # noqa: E402

from skyward.providers.ray_import import import_ray  # noqa: E402

ADDONS = ("pydantic", "starlette", "pyarrow")
"""The libraries Ray's serialization addons are for (top-level module names)."""
RAY_WORKER = "ray._private.workers.default_worker"
"""Ray's worker script, as a module."""


def when_imported(apply: Callable[[object], None]) -> Callable[[object], None]:
    """``apply`` (Ray's ``serialization_addons.apply``) for a process that has imported
    one of ``ADDONS``; nothing for one that has not."""

    def applied(context: object) -> None:
        if any(name in sys.modules for name in ADDONS):
            apply(context)

    return applied


def ray_addons() -> ModuleType | None:
    """Ray's ``serialization_addons``, where it has its ``apply``; None where Ray has moved
    either (then Ray's own registers the serializers as it ships)."""
    try:
        from ray.util import serialization_addons
    except ImportError:
        return None
    return serialization_addons if callable(getattr(serialization_addons, "apply", None)) else None


def ray_worker_script() -> str | None:
    """The path of Ray's worker script in this environment, or None where Ray has moved
    it (then ``ray_start`` leaves the raylet's command as Ray made it)."""
    try:
        spec = importlib.util.find_spec(RAY_WORKER)
    except ImportError:
        return None
    return spec.origin if spec is not None else None


def main() -> None:
    """Run Ray's worker script with this process's arguments, as the module says.
    SystemExit naming the script when Ray's is not there."""
    import_ray()  # first: looking for Ray's script below imports Ray
    script = ray_worker_script()
    if script is None:
        raise SystemExit(f"skyward's Ray worker: Ray's worker script ({RAY_WORKER}) is not there")
    sys.path.insert(0, os.path.dirname(script))
    addons = ray_addons()
    if addons is not None:
        setattr(addons, "apply", when_imported(addons.apply))  # for the life of this worker
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
