"""A client script the fault tests run in a subprocess and then kill, or let a task
exhaust its memory: ``python -m tests.e2e.fault_client SCENARIO``.

It prints one JSON line describing the pool it opened (the Ray temp dir, the agents'
process ids) and then ``READY``; what happens next depends on the scenario:

- ``idle``: a 2-node pool on the process executor, with collection hosts, runs two long
  tasks and waits to be killed (SIGKILL or SIGTERM); it also starts a process of its own
  (a ``sleep`` in a session of its own, its pid as ``bystander``), which neither the
  pool's end nor its reaper may touch.
- ``oom``: a 2-node pool whose node 1 allocates past the memory cgroup the test put the
  client in; prints the error and the Error events as JSON, then the agents' pids again.
- ``crash``: a task ends its agent with ``os._exit``; prints the error as JSON (whatever
  the client's stderr shows is the test's to read).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

import skyward as sky
from skyward.providers.local.ray_instance import LocalRay


@sky.function
def pid() -> int:
    return os.getpid()


@sky.function
def hold(seconds: float) -> None:
    time.sleep(seconds)


@sky.function
def hog(megabytes: int) -> int:
    block = b"\1" * (megabytes << 20)  # touches every page
    return len(block)


@sky.function
def ends() -> None:
    os._exit(3)


def main(scenario: str) -> None:
    worker = sky.Worker(concurrency=2, executor="process" if scenario == "idle" else "thread")
    options = sky.Options(console=False, logging=False, worker=worker)
    with sky.Compute(nodes=2, options=options) as pool:
        errors: list[str] = []
        pool.on(sky.Error, lambda event: errors.append(event.message))
        agents = [pool.run(pid(), target=node) for node in range(2)]
        started = [child.pid for child in psutil.Process().children(recursive=True)]  # Ray's, the reaper
        bystander = subprocess.Popen(  # not on our pipes: a reader of them waits for its end
            ["sleep", "300"], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ) if scenario == "idle" else None
        print(json.dumps({
            "temp_dir": LocalRay.temp_dir(), "agents": agents, "client": os.getpid(), "started": started,
            "bystander": bystander and bystander.pid,
        }), flush=True)
        if scenario == "idle":
            pool.queue("kept").put(1)  # collection hosts exist too
            pool.dict("kept")["k"] = 1
            futures = [hold(600) > pool for _ in range(2)]
            print("READY", flush=True)
            futures[0].result()
            return
        print("READY", flush=True)
        if scenario == "crash":
            try:
                pool.run(ends())
            except sky.NodeCrashedError as exc:
                print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
            time.sleep(1.0)  # Ray reports the death to the driver within this
            return
        try:
            pool.run(hog(4096), target=1)
            outcome = {"error": None}
        except Exception as exc:
            outcome = {"error": type(exc).__name__, "message": str(exc)}
        time.sleep(0.5)
        after = [pool.run(pid(), target=node) for node in range(2)]
        print(json.dumps({**outcome, "events": errors, "agents_after": after}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
