"""In a process that acquires locks or joins barriers: who holds (``holder_id``) and
keeping its holders' leases alive (``LeaseKeeper``).

A "holder" string names the node, the process and the task (or, outside tasks, the
thread), e.g. ``"2/4711/task-t17"``. A lock belongs to its holder: another task cannot
release it, and it is freed when the holder's task ends or its process dies.

Every ``RENEW_EVERY`` seconds it renews, per host, the leases of the holders this
process registered there, as long as the holder's process is alive (an executor child
is checked by its pid). A holder that dies stops being renewed, so its host frees it
within ``LEASE_TTL``; a holder whose task ends is released at once (``end_task``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable

import psutil

from skyward.collections.config import RENEW_EVERY
from skyward.collections.remote import HostHandle
from skyward.core.instance import current_task, instance_info
from skyward.core.loop_thread import LoopThread

CLIENT = "client"
TASK_PREFIX = "task-"


def holder_id() -> str:
    """The holder string of the caller (task or thread) in this process."""
    info = instance_info()
    node = CLIENT if info is None else str(info.node)
    task = current_task()
    who = f"{TASK_PREFIX}{task.task_id}" if task is not None else f"thread-{threading.get_ident()}"
    return f"{node}/{os.getpid()}/{who}"


def holder_pid(holder: str) -> int:
    """The process id in ``holder``."""
    return int(holder.split("/", 2)[1])


def holder_task(holder: str) -> str | None:
    """The task id in ``holder``, or None for a thread holder."""
    who = holder.split("/", 2)[2]
    return who[len(TASK_PREFIX):] if who.startswith(TASK_PREFIX) else None


class LeaseKeeper:
    """Renews leases on a background loop while this process has any."""

    def __init__(self, loop: LoopThread, handle: Callable[[int], HostHandle]) -> None:
        self._loop = loop
        self._handle = handle
        self._lock = threading.Lock()
        self._held: dict[tuple[int, str], float] = {}
        self._running = False

    def hold(self, host: int, holder: str) -> None:
        """``holder`` now owns something on ``host``: keep its lease alive."""
        with self._lock:
            self._held[(host, holder)] = time.monotonic()
            start, self._running = not self._running, True
        if start:
            self._loop.submit(self._renew_loop())

    def end_task(self, task_id: str, failed: bool) -> None:
        """Task ``task_id`` ended: its holders let go of everything, now."""
        if not self._held:
            return
        with self._lock:
            ended = [key for key in self._held if holder_task(key[1]) == task_id]
            for key in ended:
                del self._held[key]
        for host, holder in ended:
            self._handle(host).holder_ended.remote(holder, failed)

    async def _renew_loop(self) -> None:
        while True:
            with self._lock:
                if not self._held:
                    self._running = False
                    return
                held = list(self._held)
            alive = _alive_pids({holder_pid(holder) for _, holder in held})
            by_host: dict[int, list[str]] = {}
            for host, holder in held:
                if holder_pid(holder) in alive:
                    by_host.setdefault(host, []).append(holder)
                else:
                    self._forget(host, holder, time.monotonic())
            sent = time.monotonic()
            answers = await asyncio.gather(
                *(self._handle(host).renew.remote(holders) for host, holders in by_host.items()),
                return_exceptions=True,
            )
            for host, unknown in zip(by_host, answers):
                if isinstance(unknown, BaseException):
                    continue
                for holder in unknown:
                    self._forget(host, holder, sent)
            await asyncio.sleep(RENEW_EVERY)

    def _forget(self, host: int, holder: str, before: float) -> None:
        """Stop renewing ``holder`` on ``host`` unless it was (re)registered after ``before``."""
        with self._lock:
            registered = self._held.get((host, holder))
            if registered is not None and registered < before:
                del self._held[(host, holder)]


def _alive_pids(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        if pid == os.getpid():
            alive.add(pid)
            continue
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive
