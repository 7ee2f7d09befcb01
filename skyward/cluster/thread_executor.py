"""Runs tasks on threads of the agent process, with a deadline per call (per item for maps).

When a deadline passes the caller gets a timeout outcome at once and the slot is free;
the task's thread is sent a TimeoutError, which stops pure-Python code at its next
bytecode and blocking calls when they return.
"""

from __future__ import annotations

import ctypes
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from skyward.cluster.execution import execute
from skyward.cluster.wire import Outcome, TaskFailure, TaskRequest
from skyward.runtime import InstanceInfo, TaskContext, task_scope

SPARE_THREADS = 32


class _Progress:
    """Where a running task is: which item, since when, on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.item = 0
        self.started = time.monotonic()
        self.thread_id: int | None = None
        self.abandoned = False

    def next_item(self, index: int) -> None:
        with self.lock:
            self.item, self.started = index, time.monotonic()

    def abandon(self) -> None:
        """Give up on the task and interrupt its thread (best effort)."""
        with self.lock:
            self.abandoned = True
            if self.thread_id is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self.thread_id), ctypes.py_object(TimeoutError)
                )


class ThreadExecutor:
    """Runs each request on a pool thread with the task's context set."""

    def __init__(self, info: InstanceInfo, concurrency: int, on_task_end: Any) -> None:
        self._info = info
        self._on_task_end = on_task_end
        self._threads = ThreadPoolExecutor(concurrency + SPARE_THREADS, thread_name_prefix="skyward-task")

    def run(self, request: TaskRequest) -> Outcome:
        progress = _Progress()
        future: Future[Outcome] = self._threads.submit(self._work, request, progress)
        if request.timeout is None:
            return future.result()
        while True:
            with progress.lock:
                deadline = progress.started + request.timeout
            try:
                return future.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                with progress.lock:
                    expired = time.monotonic() >= progress.started + request.timeout
                    item = progress.item
                if expired:
                    progress.abandon()
                    return False, timeout_failure(request, self._info.node, item)

    def _work(self, request: TaskRequest, progress: _Progress) -> Outcome:
        with progress.lock:
            progress.thread_id = threading.get_ident()
        token = task_scope().set(TaskContext(request.task_id, request.name, self._info))
        try:
            return execute(request, self._info.node, progress.next_item)
        except BaseException as exc:  # an interrupt delivered outside the user's code
            return False, TaskFailure.from_exception(exc, self._info.node)
        finally:
            with progress.lock:
                progress.thread_id = None
            task_scope().reset(token)
            self._on_task_end(request.task_id)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def timeout_failure(request: TaskRequest, node: int, item: int | None) -> TaskFailure:
    """The failure reported when ``request`` (or one of its items) ran out of time."""
    what = request.name if request.kind == "call" else f"an item of map({request.name})"
    message = f"{what} did not finish within its timeout of {request.timeout:g}s on node {node}"
    return TaskFailure(
        "TimeoutError", message, "", node, _pickled_timeout(message),
        item if request.kind != "call" else None, timed_out=True,
    )


def _pickled_timeout(message: str) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(TimeoutError(message))
