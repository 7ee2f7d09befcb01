"""Follow a pool from code: per-pool handlers, a global callback, metrics and the log file.

Run it with `python examples/observe_events.py`. The console is off ("silent"), so all
that is printed comes from the handlers below.
"""

import os
import tempfile
import time

import skyward as sky


@sky.function
def work(x: int) -> int:
    print(f"working on {x}")
    return x * 2


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="skyward-example-") as log_dir:
        follow(os.path.join(log_dir, "skyward.log"))


def follow(log_file: str) -> None:
    image = sky.Image(metrics=[
        sky.metrics.CPU(interval=0.5),
        sky.metrics.Memory(),
        sky.metrics.Custom("load", "uptime", interval=1.0),  # the last number uptime prints
    ])
    options = sky.Options(console="silent", logging=sky.LogConfig(file=log_file))
    pool = sky.Compute(nodes=2, image=image, options=options)

    printed: list[str] = []
    latest: dict[str, float] = {}
    pool.on(sky.Log, lambda e: printed.append(f"node {e.node}: {e.line}"))
    pool.on(sky.Metric, lambda e: latest.__setitem__(e.name, e.value))

    def on_progress(event: sky.Progress) -> None:
        if event.finished:
            print(f"{event.kind} {event.name}: {event.done}/{event.total}")

    stop_progress = pool.on(sky.Progress, on_progress)  # pool.on returns an unsubscribe function

    lifecycle: list[str] = []
    errors: list[str] = []

    def on_lifecycle(event: sky.Event) -> None:
        if isinstance(event, (sky.ClusterReady, sky.ClusterDestroyed, sky.Error)):
            lifecycle.append(type(event).__name__)
        if isinstance(event, sky.Error):
            errors.append(event.message)

    def on_cost(event: sky.Event) -> None:
        if isinstance(event, sky.CostFinal):
            print(f"cost: ${event.total_cost:.2f} for {event.total_seconds:.1f}s")

    with sky.use_callback(sky.compose(on_lifecycle, on_cost)):
        with pool:
            print("doubled:", pool.map(work, range(4)))
            stop_progress()
            time.sleep(1.5)  # let a few metric samples arrive
        sky.emit(sky.Error("a client-side problem"))  # your own events reach the same callbacks

    print("task output seen:", sorted(printed))
    print("metrics seen:", sorted(latest))
    print("lifecycle:", lifecycle)
    print("errors:", errors)
    with open(log_file, encoding="utf-8") as log:
        task_lines = [line for line in log if "skyward.task" in line]
    print(f"log file has {len(task_lines)} task output lines")


if __name__ == "__main__":
    main()
