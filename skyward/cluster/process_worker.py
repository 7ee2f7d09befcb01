"""Entry point of an executor child process: ``python -m skyward.cluster.process_worker R W``.

Reads an ``init`` frame (cwd, sys.path, env, InstanceInfo), then runs one ``run`` frame at
a time, sending the task's output lines, item progress and finally its outcome.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle


def main(read_fd: int, write_fd: int) -> None:
    from skyward.cluster.execution import execute
    from skyward.cluster.wire import TaskFailure
    from skyward.output import CallbackWriter
    from skyward.runtime import TaskContext, install_node_info, task_scope

    inbox = Connection(read_fd, writable=False)
    outbox = Connection(write_fd, readable=False)

    def send(*frame: Any) -> None:
        outbox.send_bytes(cloudpickle.dumps(frame))

    _, setup = cloudpickle.loads(inbox.recv_bytes())
    os.chdir(setup["cwd"])
    sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]
    os.environ.update(setup["env"])
    info = setup["info"]
    install_node_info(info)
    sys.stdout = CallbackWriter(lambda line: send("out", "stdout", line))  # type: ignore[assignment]
    sys.stderr = CallbackWriter(lambda line: send("out", "stderr", line))  # type: ignore[assignment]

    while True:
        try:
            _, request = cloudpickle.loads(inbox.recv_bytes())
        except EOFError:
            return
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
