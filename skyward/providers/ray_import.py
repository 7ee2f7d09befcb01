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
attribute of it is read, so Ray's calls work as it ships them. A thread that imports
``requests`` while Ray is being imported gets the stand-in, which reads through to the
real module the same way. A process that has imported ``requests`` or Ray already is
left as it is.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
import types

DEFERRED = "requests"
"""The module Ray imports and a pool's Ray processes never call."""
WITH_STAND_IN = ("ray", "ray._common.usage.usage_lib")
"""What is imported with the stand-in in place: Ray, and the module a driver's or a
worker's connection imports (where a Ray has it)."""
_lock = threading.Lock()


class _StandIn(types.ModuleType):
    """A module that is the real one from the first read of an attribute it lacks."""

    def __getattr__(self, name: str) -> object:
        with _lock:
            if sys.modules.get(self.__name__) is self:  # read while Ray is still importing
                del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def import_ray(*also: str) -> types.ModuleType:
    """Ray's package, imported as the module says when this process has imported neither
    Ray nor ``requests`` (with the modules of Ray named in ``also``); otherwise as Python
    would. Call it before anything that imports Ray or a module of Ray's
    (``importlib.util.find_spec`` of one imports Ray)."""
    spec = None if "ray" in sys.modules or DEFERRED in sys.modules else importlib.util.find_spec(DEFERRED)
    if spec is None:
        return importlib.import_module("ray")
    stand_in = _StandIn(DEFERRED)
    stand_in.__spec__ = spec  # what importlib.util.find_spec answers meanwhile
    with _lock:
        sys.modules.setdefault(DEFERRED, stand_in)
    try:
        ray = importlib.import_module(WITH_STAND_IN[0])
        for name in (*WITH_STAND_IN[1:], *also):
            with contextlib.suppress(ImportError):  # a Ray that has moved it imports it as it ships
                importlib.import_module(name)
        return ray
    finally:
        with _lock:
            if sys.modules.get(DEFERRED) is stand_in:
                del sys.modules[DEFERRED]
