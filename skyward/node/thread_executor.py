"""Runs tasks on threads of the agent process, with a deadline per call (per item for maps).

A call runs inline on the Ray thread that received it (no thread hop: lowest latency). At the
call's deadline a timer fires: it frees the task's slot at once and sends the thread a
TimeoutError, which stops pure-Python code at its next bytecode and a blocking call when
it returns; the client stops waiting at the deadline too. A map chunk runs on a pool
thread so each item gets its own deadline and the caller can answer as soon as one passes.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import cloudpickle

from skyward.core.instance import InstanceInfo, TaskContext, task_scope
from skyward.engine.wire import CALL, Outcome, TaskFailure, TaskRequest
from skyward.node.execution import ItemClock, MapCursor, execute

SPARE_THREADS = 32


def _interrupt(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in another thread (None clears a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )


class DeadlineTimer:
    """One thread that calls callbacks at their deadlines unless cancelled first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._cancelled: set[int] = set()
        self._ids = itertools.count()
        self._lock = threading.Lock()  # taken directly: a Condition's own `with` is Python code
        self._wake = threading.Condition(self._lock)
        threading.Thread(target=self._loop, name="skyward-deadlines", daemon=True).start()

    def watch(self, seconds: float, callback: Callable[[], None]) -> int:
        """Call ``callback`` in ``seconds`` unless ``cancel`` is called with the returned id."""
        entry = next(self._ids)
        with self._lock:
            heapq.heappush(self._heap, (time.monotonic() + seconds, entry, callback))
            if self._heap[0][1] == entry:
                self._wake.notify()
        return entry

    def cancel(self, entry: int) -> None:
        """Forget ``entry``; the heap is compacted when most of it is cancelled."""
        with self._lock:
            self._cancelled.add(entry)
            if len(self._cancelled) > 1024 and len(self._cancelled) * 2 > len(self._heap):
                self._heap = [item for item in self._heap if item[1] not in self._cancelled]
                heapq.heapify(self._heap)
                self._cancelled.clear()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._heap:
                    self._wake.wait()
                deadline, entry, callback = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                if entry in self._cancelled:
                    self._cancelled.discard(entry)
                    continue
            callback()


class _Progress:
    """Where a running map chunk is (its cursor tells which item runs) and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor = MapCursor()
        self.thread_id: int | None = None

    def abandon(self) -> None:
        with self.lock:
            if self.thread_id is not None:
                _interrupt(self.thread_id, TimeoutError)


class ThreadExecutor:
    """Runs requests with the task's context set, enforcing their deadlines."""

    def __init__(self, info: InstanceInfo, concurrency: int, on_task_end: Callable[[str], None]) -> None:
        self._info = info
        self._on_task_end = on_task_end
        self._deadlines = DeadlineTimer()
        self._threads = ThreadPoolExecutor(concurrency + SPARE_THREADS, thread_name_prefix="skyward-task")

    def set_info(self, info: InstanceInfo) -> None:
        """Tasks started from now on see ``info`` (the pool's membership changed)."""
        self._info = info

    def run(self, request: TaskRequest, release_slot: Callable[[], None]) -> Outcome:
        """Run ``request``; ``release_slot`` is called early if its deadline passes."""
        if request.kind == CALL:
            return self._run_inline(request, release_slot)
        return self._run_chunk(request)

    def _run_inline(self, request: TaskRequest, release_slot: Callable[[], None]) -> Outcome:
        thread_id = threading.get_ident()
        lock = threading.Lock()
        state = {"finished": False, "fired": False}

        def expire() -> None:
            with lock:
                if state["finished"]:
                    return
                state["fired"] = True
                _interrupt(thread_id, TimeoutError)
            release_slot()

        entry = self._deadlines.watch(request.timeout, expire) if request.timeout else None
        token = task_scope().set(TaskContext(request.task_id, request.name, self._info))
        try:
            try:
                outcome = execute(request, self._info.node)
            finally:
                with lock:
                    state["finished"] = True
                    if state["fired"]:
                        _interrupt(thread_id, None)
                if entry is not None:
                    self._deadlines.cancel(entry)
        except BaseException as exc:  # the interrupt landed outside the user's code
            outcome = False, TaskFailure.from_exception(exc, self._info.node)
        finally:
            task_scope().reset(token)
            self._on_task_end(request.task_id)
        if state["fired"]:
            return False, timeout_failure(request, self._info.node, None)
        return outcome

    def _run_chunk(self, request: TaskRequest) -> Outcome:
        """The chunk's outcome, run on a pool thread; which item runs is timed by an
        ``ItemClock``, and the chunk is abandoned when one has run out of time."""
        progress = _Progress()
        future: Future[Outcome] = self._threads.submit(self._work, request, progress)
        if request.timeout is None:
            return future.result()
        clock = ItemClock(request.timeout)
        while (wait := clock.look(progress.cursor.index())) is not None:
            try:
                return future.result(timeout=wait)
            except FutureTimeout:
                pass
        progress.abandon()
        return False, timeout_failure(request, self._info.node, clock.item)

    def _work(self, request: TaskRequest, progress: _Progress) -> Outcome:
        with progress.lock:
            progress.thread_id = threading.get_ident()
        token = task_scope().set(TaskContext(request.task_id, request.name, self._info))
        try:
            return execute(request, self._info.node, cursor=progress.cursor)
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
    what = request.name if request.kind == CALL else f"an item of map({request.name})"
    message = f"{what} did not finish within its timeout of {request.timeout:g}s on node {node}"
    return TaskFailure(
        "TimeoutError", message, "", node, cloudpickle.dumps(TimeoutError(message)),
        item if request.kind != CALL else None, timed_out=True,
    )
