"""Entry point of an executor child process: ``python -m skyward.node.process_worker R W I``.

Started with the pool's environment, reads a ``StartWorker`` message (cwd, sys.path,
InstanceInfo, collections layout), then runs one ``RunTask`` at a time (with the node's
InstanceInfo when the pool's membership changed it), sending the task's output lines
and finally its outcome, each a typed message of ``core.messages`` (``FromWorker``).
Before each item of a map it stores the item's index in the cell its agent shares
(``node.item_cell``, descriptor ``I``). Distributed-collection operations go to the
agent over the same pipes (``skyward.collections.bridge``).
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection

import cloudpickle

from skyward.core import messages
from skyward.core.codec import decode_message, encode_message, load_payload


def main(read_fd: int, write_fd: int, item_fd: int) -> None:
    from skyward.collections import installed as collections_runtime
    from skyward.collections.bridge import ChildBridge
    from skyward.collections.lock import forget_task
    from skyward.core.instance import TaskContext, install_node_info, task_scope
    from skyward.core.output import CallbackWriter
    from skyward.engine import publish
    from skyward.engine.wire import TaskFailure
    from skyward.node.execution import execute
    from skyward.node.item_cell import ItemCell
    from skyward.plugins.node import install_process

    item = ItemCell(item_fd)
    os.close(item_fd)
    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    send_lock = threading.Lock()

    def send(message: messages.FromWorker) -> None:
        data = encode_message(message)
        with send_lock:
            outbox.send_bytes(data)

    setup = decode_message(inbox.recv_bytes())
    if not isinstance(setup, messages.StartWorker):
        raise SystemExit(f"a worker process starts with StartWorker, not {type(setup).__name__}")
    os.chdir(setup.cwd)
    sys.path[:0] = [p for p in setup.sys_path if p not in sys.path]
    info = load_payload(setup.info)  # from the node agent that started this process
    install_node_info(info)
    plugins = install_process(setup.plugins, info)
    publish.install(lambda event: send(messages.TaskEvent(cloudpickle.dumps(event))))
    bridge = ChildBridge(inbox, send)
    collections_runtime.install_child(load_payload(setup.collections) if setup.collections else None, bridge)
    sys.stdout = CallbackWriter(lambda line: send(messages.TaskOutput("stdout", line)))
    sys.stderr = CallbackWriter(lambda line: send(messages.TaskOutput("stderr", line)))

    while True:
        task = bridge.next_task()
        if task is None:
            plugins.close()
            return
        request = load_payload(task.request)
        if task.info:
            info = load_payload(task.info)
            install_node_info(info)
        token = task_scope().set(TaskContext(request.task_id, request.name, info))
        try:
            outcome = execute(request, info.node, item.setter())
        finally:
            task_scope().reset(token)
            forget_task(request.task_id)  # the agent frees its holds at the host; this child's record goes too
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            send(messages.TaskDone(cloudpickle.dumps(outcome)))
        except Exception as exc:  # the result itself cannot be pickled
            failure = TaskFailure(
                "TypeError",
                f"the result of {request.name} cannot be pickled to send back: {exc}",
                "",
                info.node,
                cloudpickle.dumps(TypeError(f"the result of {request.name} cannot be pickled: {exc}")),
            )
            send(messages.TaskDone(cloudpickle.dumps((False, failure))))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
