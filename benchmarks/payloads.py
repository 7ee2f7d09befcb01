"""The work every engine runs. This module imports nothing at the top, so a worker that
unpickles these functions by reference loads nothing else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PROBE_SOURCE = "def probe(array):\n    return int(array.nbytes) + int(array[-1])\n"
SCRIPT_SOURCES = {
    "noop": "def noop():\n    return None\n",
    "identity": "def identity(value):\n    return value\n",
    "probe": PROBE_SOURCE,
    "probe_counted": PROBE_SOURCE + "def probe_counted(counted):\n    return probe(counted.payload)\n",
    "burn": (
        "def burn(reps):\n"
        "    import numpy as np\n"
        "    values = np.linspace(0.0, 1.0, 8_192)\n"
        "    total = 0.0\n"
        "    for _ in range(reps):\n"
        "        values = np.sqrt(values * values + 1.0) - 0.5\n"
        "        total += float(values[0])\n"
        "    return total\n"
    ),
    "pid": "def pid():\n    import os\n    return os.getpid()\n",
}
"""The work of B1-B4, B6 and H1 as a user's script defines it, for ``in_script``: the
same code as the importable functions of the same name below (``probe_counted``, B3's
count of serializations, is ``probe`` of a ``Counted``'s array)."""


def in_script(name: str) -> Callable[..., Any]:
    """``name`` (a key of ``SCRIPT_SOURCES``) defined in ``__main__``, as every user's script
    and example defines its functions: cloudpickle ships such a function by value, where
    the importable one here goes by reference. Define it before a process pool forks its
    workers, so they find it in their copy of ``__main__``."""
    import sys

    namespace = vars(sys.modules["__main__"])
    exec(compile(SCRIPT_SOURCES[name], "<script>", "exec"), namespace)  # noqa: S102 (our own source)
    function: Callable[..., Any] = namespace[name]
    return function


def noop() -> None:
    """The trivial call of B1."""
    return None


def identity(value: Any) -> Any:
    """The trivial item of B2."""
    return value


def identities(values: list[Any]) -> list[Any]:
    """B2's batched peers: ``identity`` of every item of one task's batch."""
    return [identity(value) for value in values]


def probe(array: Any) -> int:
    """B3: proves the array arrived (size and its last element) without copying it."""
    return int(array.nbytes) + int(array[-1])


def burn(reps: int) -> float:
    """B6: CPU-bound numpy work, ``reps`` passes over an 8k-element array (single-threaded
    ufuncs, no BLAS). Temporaries stay at 64 KB, under glibc's mmap threshold: Dask's
    nanny sets ``MALLOC_TRIM_THRESHOLD_``, which pins that threshold at 128 KB, and larger
    temporaries would then cost an mmap and page faults each (5x slower there)."""
    import numpy as np

    values = np.linspace(0.0, 1.0, 8_192)
    total = 0.0
    for _ in range(reps):
        values = np.sqrt(values * values + 1.0) - 0.5
        total += float(values[0])
    return total


def pid() -> int:
    """The worker's process id."""
    import os

    return os.getpid()


class Counted:
    """B3: a wrapper that counts how often this process serializes it."""

    pickled = 0

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        Counted.pickled += 1
        return Counted, (self.payload,)


def megabyte(index: int) -> bytes:
    """H2: one MiB of result per item."""
    return bytes([index % 256]) * (1 << 20)
