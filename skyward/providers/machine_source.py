"""``MachineSource``: the part a cloud's ``Machines`` (``ssh.membership``) share: no
known limit on how many, and no new machine once the pool is closing."""

from __future__ import annotations

import threading
from typing import ClassVar

from skyward.model.nodes import NodeHandle


class MachineSource:
    """Base of a cloud's ``Machines``. ``create(node)`` runs the subclass's ``_start(node)``
    under ``_lock`` (which the subclass may take for its own records too), so ``close()``
    waits for a machine being started and the pool's teardown then ends that one too;
    after ``close()``, ``create`` raises RuntimeError ("no <_noun> was started for node N:
    the pool is closing") and starts nothing. ``capacity()`` is None: no limit known."""

    _noun: ClassVar[str] = "machine"
    """What one machine is called in errors ("instance", "machine")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    def capacity(self) -> int | None:
        return None

    def create(self, node: int) -> NodeHandle:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"no {self._noun} was started for node {node}: the pool is closing")
            return self._start(node)

    def close(self) -> None:
        """The pool is closing: no machine is started any more (waits for one starting)."""
        with self._lock:
            self._closed = True

    def _start(self, node: int) -> NodeHandle:
        """Start rank ``node``'s machine and return its handle once it runs; raises naming
        the cause when it cannot."""
        raise NotImplementedError
