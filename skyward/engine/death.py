"""Why a process died, in words: its exit code or signal, a crash report, and whether the
kernel's out-of-memory killer took it.

An executor child's exit status is known to its agent (``describe_exit``). An agent's
own process is Ray's child, not ours, so it leaves a note for its post-mortem instead
(``arm``, in a notes directory of the pool): its memory cgroup and how many processes
the kernel had killed for memory there when it started, and a file where
``faulthandler`` writes a fatal signal (segfault, abort, bus error) as it happens.
``cause_of_death`` reads the note of a node's dead agent. Nothing can record a SIGKILL
from inside; an OOM kill is told by the cgroup's counter having gone up. A task that ends
its own agent from Python (``os._exit``, ``os.kill`` of its own process) is recorded as it
happens, so a death is known to be the task's doing (``Death.by_task``), and only a death
with no such trace is taken for the infrastructure's (a kill from outside, a lost machine).
"""

from __future__ import annotations

import faulthandler
import glob
import json
import os
import signal
from typing import IO, NoReturn, TypedDict

from msgspec import Struct

from skyward.core.instance import current_task

_fault_file: IO[str] | None = None
_exit_path = ""
_real_exit = os._exit
_real_kill = os.kill
_FATAL = {signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}
_CRASH_SIGNALS = {
    "Segmentation fault": "a segmentation fault (SIGSEGV): a crash in native code",
    "Aborted": "an abort (SIGABRT): native code gave up",
    "Bus error": "a bus error (SIGBUS)",
    "Floating-point exception": "a floating-point exception (SIGFPE)",
    "Illegal instruction": "an illegal instruction (SIGILL)",
}


def describe_exit(returncode: int | None, oom: str | None = None) -> str:
    """An exit status (``Popen.returncode``: negative for a signal) in words; ``oom`` is
    what ``oom_kills_since`` found, if anything."""
    if returncode is None:
        return "it is still running"
    if returncode >= 0:
        return f"it exited with code {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    if oom is not None:
        return f"it was killed by the kernel's out-of-memory killer ({name}): {oom}"
    if number == signal.SIGSEGV:
        return f"it crashed with a segmentation fault ({name}, signal {number}): a crash in native code"
    if number == signal.SIGKILL:
        return (
            f"it was killed by {name} (signal {number}): by `kill -9`, or by the kernel when the "
            "machine ran out of memory"
        )
    return f"it was killed by {name} (signal {number})"


def memory_cgroup(pid: int | str = "self") -> tuple[str, int] | None:
    """The memory cgroup directory of process ``pid`` and its count of OOM kills so far,
    or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:
        return None
    for _, controllers, path in entries:  # cgroup v1: the memory hierarchy
        if "memory" in controllers.split(","):
            directory = f"/sys/fs/cgroup/memory{path}"
            count = _counter(os.path.join(directory, "memory.oom_control"), "oom_kill")
            if count is not None:
                return directory, count
    for hierarchy, _, path in entries:  # cgroup v2
        if hierarchy == "0":
            for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                directory = f"{root}{path}".rstrip("/") or root
                count = _counter(os.path.join(directory, "memory.events"), "oom_kill")
                if count is not None:
                    return directory, count
    return None


def oom_kills_since(cgroup: tuple[str, int] | None) -> str | None:
    """If the kernel killed a process for memory in ``cgroup`` since it was read, say
    so (with the cgroup's limit); None otherwise."""
    if cgroup is None:
        return None
    directory, before = cgroup
    name = "memory.oom_control" if os.path.exists(os.path.join(directory, "memory.oom_control")) else "memory.events"
    now = _counter(os.path.join(directory, name), "oom_kill")
    if now is None or now <= before:
        return None
    return f"the processes of memory cgroup {directory} reached {_limit(directory)}"


class Death(Struct, frozen=True):
    """Why an agent died, in words, and whether its own task did it (then the task is
    not retried elsewhere: it would do it again)."""

    cause: str
    by_task: bool


def arm(directory: str, node: int) -> None:
    """In an agent, at start: leave the note ``cause_of_death`` reads if it dies, and
    record a task ending the process from Python (``os._exit``, ``os.kill`` of itself)."""
    global _fault_file, _exit_path
    os.makedirs(directory, exist_ok=True)
    base = os.path.join(directory, f"node-{node}-{os.getpid()}")
    cgroup = memory_cgroup()
    with open(base + ".json", "w", encoding="utf-8") as note:
        json.dump({"pid": os.getpid(), "cgroup": list(cgroup) if cgroup else None}, note)
    _fault_file = open(base + ".fault", "w", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    faulthandler.enable(_fault_file, all_threads=False)
    _exit_path = base + ".exit"
    os._exit = _recorded_exit
    os.kill = _recorded_kill


def _record(what: str) -> None:
    """Note that the running task ends this process (nothing outside a task is noted)."""
    task = current_task()
    if task is None or not _exit_path:
        return
    try:
        with open(_exit_path, "w", encoding="utf-8") as note:
            note.write(f"its task {task.name} {what}")
    except OSError:
        pass


def _recorded_exit(status: int) -> NoReturn:
    _record(f"called os._exit({status})")
    _real_exit(status)


def _recorded_kill(pid: int, sig: int) -> None:
    if pid in (0, os.getpid()) and sig in _FATAL:
        _record(f"sent its own process {signal.Signals(sig).name}")
    _real_kill(pid, sig)


class _Note(TypedDict):
    """What ``arm`` leaves: the agent's pid, and its memory cgroup's directory and count
    of OOM kills then (``memory_cgroup``; a JSON list), if it has one."""

    pid: int
    cgroup: list[str | int] | None


def cause_of_death(directory: str, node: int) -> Death | None:
    """Why node ``node``'s most recent dead agent died, from its note; None if it left
    none (no notes directory, or its agent is alive). A crash report, an OOM kill or a
    recorded exit is the task's doing; a death without a trace is not."""
    notes = []
    for path in glob.glob(os.path.join(directory, f"node-{node}-*.json")):
        try:
            with open(path, encoding="utf-8") as file:
                note: _Note = json.load(file)
            notes.append((os.path.getmtime(path), path, note))
        except (OSError, ValueError):
            continue
    for _, path, note in sorted(notes, reverse=True):
        if _alive(note["pid"]):
            continue
        base = path.removesuffix(".json")
        exited = _first_line(base + ".exit")
        if exited:
            return Death(f"it ended because {exited}", True)
        fault = _first_line(base + ".fault")
        if fault:
            for text, meaning in _CRASH_SIGNALS.items():
                if text in fault:
                    return Death(f"it crashed with {meaning} [{fault}]", True)
            return Death(f"it crashed: {fault}", True)
        cgroup = note.get("cgroup")
        oom = oom_kills_since((str(cgroup[0]), int(cgroup[1])) if cgroup else None)
        if oom is not None:
            return Death(f"it was killed by the kernel's out-of-memory killer (SIGKILL): {oom}", True)
        return Death(
            "it ended without a crash report: killed by SIGKILL from outside its tasks (`kill -9`, or "
            "the kernel when the machine ran out of memory)",
            False,
        )
    return None


def _alive(pid: int) -> bool:
    """True for a running process (a zombie, dead but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                if line.strip():
                    return line.strip()
    except OSError:
        pass
    return ""


def _counter(path: str, key: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def _limit(directory: str) -> str:
    for name in ("memory.limit_in_bytes", "memory.max"):
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as file:
                text = file.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return f"its memory limit of {int(text) / 1024**2:,.0f} MiB"
    return "the memory the machine has"
