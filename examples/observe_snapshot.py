"""Render the live console of a real pool into an SVG: how docs/images/console.png is made.

    python examples/observe_snapshot.py docs/images/console.svg
    rsvg-convert docs/images/console.svg -o docs/images/console.png

A 4-node pool maps 300 items; when the map is about half done, the panel (nodes table
with CPU/memory bars and current tasks, the progress bar) is printed into a recording
rich Console under the task output printed so far, and saved as SVG.
"""

import io
import sys
import threading
import time

from rich.console import Console

import skyward as sky
from skyward.observe.rich_console import RichConsole


@sky.function
def step(x: int) -> int:
    time.sleep(0.02)
    if x % 75 == 0:
        print(f"checkpoint at item {x}")
    return x * x


def main(path: str) -> None:
    terminal = Console(record=True, width=100, force_terminal=True, color_system="truecolor", file=io.StringIO())
    pool = sky.Compute(nodes=4, options=sky.Options(console=False, logging=False))
    console = RichConsole(pool.on, console=terminal, live=False)
    halfway = threading.Event()
    pool.on(sky.Progress, lambda e: e.done >= e.total // 2 and halfway.set())
    with pool:
        time.sleep(1.5)  # a metric sample or two
        mapping = threading.Thread(target=pool.map, args=(step, range(300)))
        mapping.start()
        halfway.wait(60)
        terminal.print(console.renderable())
        svg = terminal.export_svg(title="skyward")
        mapping.join()
    console.close()
    with open(path, "w", encoding="utf-8") as out:
        out.write(svg)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/images/console.svg")
