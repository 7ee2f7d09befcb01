"""Entry point of an executor child process: ``python -m skyward.node.process_worker R W``.

Reads an ``init`` frame (cwd, sys.path, env, InstanceInfo, collections layout), then runs
one ``run`` frame at a time (with the node's InstanceInfo when the pool's membership
changed it), sending the task's output lines, item progress and finally
its outcome. Distributed-collection operations go to the agent over the same pipes
(``skyward.collections.bridge``).
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection

import cloudpickle

from skyward.core.codec import load_payload


def main(read_fd: int, write_fd: int) -> None:
    from skyward.collections import installed as collections_runtime
    from skyward.collections.bridge import ChildBridge
    from skyward.core.instance import TaskContext, install_node_info, task_scope
    from skyward.core.output import CallbackWriter
    from skyward.engine import publish
    from skyward.engine.wire import TaskFailure
    from skyward.node.execution import execute
    from skyward.plugins.node import install_process

    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)
    send_lock = threading.Lock()

    def send(*frame: object) -> None:
        data = cloudpickle.dumps(frame)
        with send_lock:
            outbox.send_bytes(data)

    _, setup = load_payload(inbox.recv_bytes())
    os.chdir(setup["cwd"])
    sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]
    os.environ.update(setup["env"])
    info = setup["info"]
    install_node_info(info)
    plugins = install_process(setup.get("plugins", b""), info)
    publish.install(lambda event: send("event", event))
    bridge = ChildBridge(inbox, send)
    collections_runtime.install_child(setup.get("collections"), bridge)
    sys.stdout = CallbackWriter(lambda line: send("out", "stdout", line))
    sys.stderr = CallbackWriter(lambda line: send("out", "stderr", line))

    while True:
        frame = bridge.next_frame()
        if frame is None:
            plugins.close()
            return
        _, request, changed = load_payload(frame)
        if changed is not None:
            info = changed
            install_node_info(info)
        token = task_scope().set(TaskContext(request.task_id, request.name, info))
        try:
            outcome = execute(request, info.node, lambda index: send("item", index))
        finally:
            task_scope().reset(token)
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            send("done", outcome)
        except Exception as exc:  # the result itself cannot be pickled
            failure = TaskFailure(
                "TypeError",
                f"the result of {request.name} cannot be pickled to send back: {exc}",
                "",
                info.node,
                cloudpickle.dumps(TypeError(f"the result of {request.name} cannot be pickled: {exc}")),
            )
            send("done", (False, failure))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
