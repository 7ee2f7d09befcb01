"""Importing Ray without ``requests``, which a pool's Ray processes never call.

Ray imports ``requests`` (and urllib3 with it), 35-50 ms of CPU, in the client and in
every worker of a pool, on the busiest moment of its open: as it is imported (its TPU
support asks a Google Cloud TPU VM's metadata server with it; its state API), and as a
driver or a worker connects (its usage statistics, which report over HTTP where they
are on; a pool's Ray runs with them off).

``import_ray`` imports Ray, and the usage statistics' module, with a stand-in for
``requests`` in ``sys.modules`` and takes the stand-in out again as soon as they are
imported, so the process's own ``import requests``, before or after, is Python's own.
The stand-in stays where Ray bound it and imports the real module the first time any
attribute of it is read, so Ray's calls work as it ships them; it is a plain module
object (a module ``__getattr__``), which pickles by name as the real one does.

Only the importing thread may see the stand-in: another thread's ``import
requests.adapters`` through it would load that submodule twice. So the stand-in is used
only when no other thread can be importing: every other live thread is skyward's own
(named ``skyward-...``; none imports ``requests``) or the main thread, which is then the
one waiting for the pool this import is for (a script's ``with sky.Compute(...)``); a
worker or ``ray start`` calls this before it starts any thread. Anywhere else (a
notebook's kernel, an application with threads of its own) Ray is imported as it ships.
A process that has imported ``requests`` or Ray already is left as it is too.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
import types
from importlib.machinery import ModuleSpec

DEFERRED = "requests"
"""The module Ray imports and a pool's Ray processes never call."""
WITH_STAND_IN = ("ray", "ray._common.usage.usage_lib")
"""What is imported with the stand-in in place: Ray, and the module a driver's or a
worker's connection imports (where a Ray has it)."""
_lock = threading.Lock()


def stand_in(spec: ModuleSpec) -> types.ModuleType:
    """A module for ``spec``'s package that is the real one from the first read of an
    attribute it lacks (taking itself out of ``sys.modules`` first, if it is there)."""
    module = types.ModuleType(spec.name)
    module.__spec__ = spec  # what importlib.util.find_spec answers meanwhile

    def read_through(name: str) -> object:
        with _lock:
            if sys.modules.get(spec.name) is module:  # read while Ray is still importing
                del sys.modules[spec.name]
        return getattr(importlib.import_module(spec.name), name)

    module.__getattr__ = read_through  # type: ignore[method-assign]  # a module's own, PEP 562
    return module


def alone() -> bool:
    """Whether no thread but this one can be importing now (see the module docstring)."""
    this, main = threading.current_thread(), threading.main_thread()
    return all(
        thread is this or thread is main or thread.name.startswith("skyward-") for thread in threading.enumerate()
    )


def import_ray(*also: str) -> types.ModuleType:
    """Ray's package, imported as the module says when this process has imported neither
    Ray nor ``requests`` (with the modules of Ray named in ``also``) and no other thread
    can be importing (``alone``); otherwise as Python would. Call it before anything that
    imports Ray or a module of Ray's (``importlib.util.find_spec`` of one imports Ray)."""
    fresh = "ray" not in sys.modules and DEFERRED not in sys.modules and alone()
    spec = importlib.util.find_spec(DEFERRED) if fresh else None
    if spec is None:
        return importlib.import_module("ray")
    placed = stand_in(spec)
    with _lock:
        sys.modules.setdefault(DEFERRED, placed)
    try:
        ray = importlib.import_module(WITH_STAND_IN[0])
        for name in (*WITH_STAND_IN[1:], *also):
            with contextlib.suppress(ImportError):  # a Ray that has moved it imports it as it ships
                importlib.import_module(name)
        return ray
    finally:
        with _lock:
            if sys.modules.get(DEFERRED) is placed:
                del sys.modules[DEFERRED]
