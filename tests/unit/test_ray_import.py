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


def test_the_stand_in_reads_through_and_pickles_by_name_as_a_module() -> None:
    """What Ray's modules hold after ``import_ray``: the first attribute read takes the
    stand-in out of ``sys.modules`` (where ``import_ray`` puts it) and reads the real
    module, and it pickles by name, as a module does."""
    out = _run("""
        import importlib.util, sys
        import cloudpickle
        from skyward.providers.ray_import import DEFERRED, stand_in
        placed = stand_in(importlib.util.find_spec(DEFERRED))
        sys.modules[DEFERRED] = placed
        print(type(placed) is type(sys), cloudpickle.loads(cloudpickle.dumps(placed)) is placed)
        print(callable(placed.get), sys.modules[DEFERRED] is not placed)
        real = sys.modules[DEFERRED]
        print(placed.Session is real.Session, cloudpickle.loads(cloudpickle.dumps(placed)) is real)
    """)
    assert out.splitlines() == ["True True", "True True", "True True"]


def test_ray_is_imported_as_it_ships_while_another_thread_could_be_importing() -> None:
    """Another thread of the process could import ``requests`` through the stand-in (a
    submodule of it would then load twice), so with one alive Ray imports it as it ships."""
    out = _run("""
        import sys, threading
        from skyward.providers.ray_import import import_ray
        done = threading.Event()
        other = threading.Thread(target=done.wait, name="an-application-thread")
        other.start()
        import_ray()
        done.set()
        import requests
        print("requests" in sys.modules, sys.modules["ray._private.accelerators.tpu"].requests is requests)
    """)
    assert out == "True True"
