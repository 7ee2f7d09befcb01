"""Ray imported without ``requests`` (skyward/providers/ray_import.py): the process's own
``import requests`` stays Python's, and Ray's code that holds the stand-in reads through
to the real module. Each case runs in a fresh interpreter, where nothing imported either."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_ray_is_imported_without_requests_and_a_later_import_is_the_real_module() -> None:
    out = _run("""
        import sys, types
        from skyward.providers.ray_import import import_ray
        ray = import_ray()
        print(ray is sys.modules["ray"], "requests" in sys.modules, "urllib3" in sys.modules)
        held = sys.modules["ray._private.accelerators.tpu"].requests
        import requests
        print(type(requests) is types.ModuleType, requests is sys.modules["requests"], held is not requests)
        print(held.get is requests.get, held.exceptions.ConnectionError is requests.exceptions.ConnectionError)
    """)
    assert out.splitlines() == ["True False False", "True True True", "True True"]


def test_a_process_that_imported_requests_first_keeps_it_for_ray_as_well() -> None:
    out = _run("""
        import sys
        import requests
        from skyward.providers.ray_import import import_ray
        import_ray()
        print(sys.modules["ray._private.accelerators.tpu"].requests is requests is sys.modules["requests"])
    """)
    assert out == "True"


def test_the_stand_in_read_while_ray_imports_gives_way_to_the_real_module() -> None:
    """A thread that imports ``requests`` while Ray is being imported gets the stand-in:
    its first read takes the stand-in out of ``sys.modules`` and reads the real module."""
    out = _run("""
        import importlib.util, sys, types
        from skyward.providers.ray_import import DEFERRED, _StandIn
        stand_in = _StandIn(DEFERRED)
        stand_in.__spec__ = importlib.util.find_spec(DEFERRED)
        sys.modules[DEFERRED] = stand_in
        import requests
        print(requests is stand_in, callable(requests.get), type(sys.modules[DEFERRED]) is types.ModuleType)
        print(requests.Session is sys.modules[DEFERRED].Session)
    """)
    assert out.splitlines() == ["True True True", "True"]
