"""Watch a pool work: nodes, a progress bar, task output, then a summary.

In a terminal (`python examples/observe_live.py`) this draws the live panel: one row
per node with its state, CPU/memory bars and current task, a progress bar with rate
and ETA for each map/broadcast/gather, and task output scrolling above it. Piped or
redirected (`python examples/observe_live.py 2>&1 | cat`) the same run prints plain
`HH:MM:SS` lines instead, which is what a script or an agent should read.
"""

import time

import skyward as sky


@sky.function
def slow_square(x: int) -> int:
    time.sleep(0.03)
    if x % 100 == 0:
        print(f"reached item {x}")
    return x * x


@sky.function
def hostname() -> str:
    return f"node {sky.instance_info().node} says hello"


def main() -> None:
    options = sky.Options(worker=sky.Worker(concurrency=2))
    with sky.Compute(nodes=2, options=options) as pool:
        squares = pool.map(slow_square, range(400))
        greetings = hostname() @ pool
    print(f"sum of squares: {sum(squares)}; {len(greetings)} greetings")


if __name__ == "__main__":
    main()
