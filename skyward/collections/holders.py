"""Who holds a lock or takes part in a barrier: a "holder" string naming the node, the
process and the task (or, outside tasks, the thread), e.g. ``"2/4711/task-t17"``.

A lock belongs to its holder: another task cannot release it, and it is freed when the
holder's task ends or its process dies.
"""

from __future__ import annotations

import os
import threading

from skyward.runtime import current_task, instance_info

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
