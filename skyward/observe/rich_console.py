"""The "rich" console: a live panel with the nodes table (state, CPU/memory/GPU bars,
current task; past 16 nodes, those in trouble and the busiest, the rest counted by
state), a progress bar per map/broadcast/gather (done/total, rate, ETA), task output and
errors scrolling above it, and a summary line when the pool stops.

Only one rich console is live at a time in a process; ``in_use()`` lets a second pool
fall back to the "log" console.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment, SegmentLines
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from skyward.observe.bus import Subscribe
from skyward.observe.describe import describe, money, plural, rate
from skyward.observe.events import (
    ClusterResized,
    CostFinal,
    CostUpdate,
    Error,
    InstancePreempted,
    InstanceReplaced,
    Log,
    TaskCompleted,
)
from skyward.observe.events import Progress as ProgressEvent
from skyward.observe.view import EVENTS, NodeState, PoolView, counted_states, shown_nodes

MAX_ROWS = 16
BAR_WIDTH = 10
TABLE_EVERY = 1.0
"""Seconds between two drawings of the nodes table in a live panel, which shows metrics
sampled once a second; the title and the progress bars are drawn 4 times a second."""
_STATUS_STYLE = {
    "starting": "yellow", "idle": "green", "busy": "bold green", "replaced": "red",
    "preempted": "red", "stopped": "dim",
}
_active_lock = threading.Lock()
_active = [0]


def in_use() -> bool:
    """True while some pool's rich console is live."""
    with _active_lock:
        return _active[0] > 0


class _RateColumn(ProgressColumn):
    """Items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(rate(speed) if speed else "", style="progress.data.speed")


class RichConsole:
    """Draws a pool's events on a rich ``Console`` (stderr by default): task output,
    failures and errors are printed as they arrive; with ``live`` the panel redraws
    itself below them until ``close()``, without it print ``renderable()`` yourself (a
    recorded Console turns it into text or SVG)."""

    def __init__(self, subscribe: Subscribe, console: Console | None = None, live: bool = True) -> None:
        self.view = PoolView()
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeRemainingColumn(compact=True, elapsed_when_finished=True),
            console=self.console,
            auto_refresh=False,
            expand=True,
        )
        self._bars: dict[str, TaskID] = {}
        self._bars_lock = threading.Lock()
        self._unsubscribe = [subscribe(kind, self.view.apply) for kind in EVENTS if kind is not ProgressEvent]
        self._unsubscribe += [
            subscribe(ProgressEvent, self._progress_event),
            subscribe(Log, self._task_output),
            subscribe(TaskCompleted, self._task_completed),
            subscribe(Error, self._notice),
            subscribe(InstanceReplaced, self._notice),
            subscribe(InstancePreempted, self._notice),
            subscribe(ClusterResized, self._change),
        ]
        self._live: Live | None = None
        self._table = _Throttled(self._locked_nodes_table, TABLE_EVERY)
        if live:
            with _active_lock:
                _active[0] += 1
            self._live = Live(
                get_renderable=self._live_panel,
                console=self.console,
                refresh_per_second=4,
                redirect_stdout=sys.stdout.isatty(),
                redirect_stderr=True,
            )
            self._live.start()

    def close(self) -> None:
        """Stop redrawing, leave the final panel on screen and print the summary."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._live is not None:
            self._table.expire()  # the panel left on screen shows the nodes as they end
            self._live.stop()
            self._live = None
            with _active_lock:
                _active[0] -= 1
            if self.view.status == "stopped":
                self.console.print(Text(self.view.summary(), style="bold"), highlight=False)

    def renderable(self) -> RenderableType:
        """The panel as it is now."""
        with self.view.lock:
            return self._panel(self._nodes_table())

    def _live_panel(self) -> RenderableType:
        """The panel the live display draws: its nodes table as last drawn, at most
        ``TABLE_EVERY`` seconds ago (with 1,000 nodes, drawing the table 4 times a second
        cost most of the console's CPU)."""
        with self.view.lock:
            return self._panel(self._table)

    def _locked_nodes_table(self) -> RenderableType:
        with self.view.lock:
            return self._nodes_table()

    def _panel(self, nodes: RenderableType) -> Panel:
        body = Group(nodes, self._progress)
        return Panel(body, title=self._title(), title_align="left", subtitle=self._subtitle(), subtitle_align="right")

    def _title(self) -> Text:
        view = self.view
        ready = sum(1 for n in view.nodes.values() if n.status in ("idle", "busy"))
        text = Text.assemble(("skyward", "bold cyan"), f" · {view.pool or 'pool'}")
        if view.provider:
            text.append(f" · {view.provider}")
        text.append(f" · {ready}/{view.wanted or len(view.nodes)} nodes")
        text.append(f" · {view.status}", style=_STATUS_STYLE.get(view.status, "bold"))
        text.append(f" · {_clock(view.elapsed())}")
        return text

    def _subtitle(self) -> Text:
        view = self.view
        text = Text(plural(view.tasks, "task"))
        if view.failures:
            text.append(f" · {view.failures} failed", style="red")
        if isinstance(view.cost, CostUpdate):
            text.append(f" · {money(view.cost.accumulated_cost)} at {money(view.cost.hourly_rate)}/h")
        elif isinstance(view.cost, CostFinal):
            text.append(f" · {money(view.cost.total_cost)}")
        return text

    def _nodes_table(self) -> RenderableType:
        view = self.view
        if not view.nodes:
            label = f"starting {plural(view.wanted, 'node')} on {view.provider}" if view.provider else "starting"
            return Spinner("dots", text=Text(label, style="yellow"))
        gpu = any("gpu" in n.metrics for n in view.nodes.values())
        table = Table(expand=True, box=None, pad_edge=False, header_style="bold dim")
        table.add_column("node", justify="right", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("cpu", no_wrap=True)
        table.add_column("mem", no_wrap=True)
        if gpu:
            table.add_column("gpu", no_wrap=True)
        table.add_column("done", justify="right", no_wrap=True)
        table.add_column("task", ratio=1, no_wrap=True, overflow="ellipsis")
        states = list(view.nodes.values())
        for state in shown_nodes(states, MAX_ROWS):
            table.add_row(*_row(state, gpu))
        if len(states) <= MAX_ROWS:
            return table
        hidden = f"      … {len(states) - MAX_ROWS} more nodes; all {len(states)}: {counted_states(states)}"
        return Group(table, Text(hidden, style="dim", no_wrap=True, overflow="ellipsis"))

    def _progress_event(self, event: ProgressEvent) -> None:
        self.view.apply(event)
        with self._bars_lock:
            bar = self._bars.get(event.batch_id)
            label = f"{event.kind} {short_name(event.name)}"
            if bar is None:
                bar = self._bars[event.batch_id] = self._progress.add_task(label, total=event.total)
            if event.failed:
                label += f" ({event.failed} failed)"
            self._progress.update(bar, completed=event.done, total=event.total, description=label)
            if event.finished:
                self._progress.stop_task(bar)
            with self.view.lock:
                kept = set(self.view.batches)
            for batch_id in [b for b in self._bars if b not in kept]:
                self._progress.remove_task(self._bars.pop(batch_id))

    def _task_output(self, event: Log) -> None:
        style = "red" if event.stream == "stderr" else ""
        self._print(Text.assemble((f"[node {event.node}] ", "cyan"), (event.line, style)))

    def _task_completed(self, event: TaskCompleted) -> None:
        if event.error is not None:
            self._print(Text(describe(event), style="red"))

    def _notice(self, event: Error | InstanceReplaced | InstancePreempted) -> None:
        self._print(Text(describe(event), style="red"))

    def _change(self, event: ClusterResized) -> None:
        self._print(Text(describe(event), style="yellow"))

    def _print(self, text: Text) -> None:
        self.console.print(text, highlight=False, soft_wrap=True)


class _Throttled:
    """A renderable made by ``make`` and drawn again only once ``every`` seconds have
    passed, the width has changed or ``expire()`` was called; in between its last
    drawing is shown as it was. Drawn by one thread at a time (rich's ``Live`` holds its
    lock while it draws)."""

    def __init__(self, make: Callable[[], RenderableType], every: float) -> None:
        self._make = make
        self._every = every
        self._lines: list[list[Segment]] = []
        self._width = -1
        self._drawn_at = 0.0

    def expire(self) -> None:
        """Draw it afresh the next time."""
        self._width = -1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        now = time.monotonic()
        if options.max_width != self._width or now - self._drawn_at >= self._every:
            self._lines = console.render_lines(self._make(), options, pad=False)
            self._width, self._drawn_at = options.max_width, now
        yield SegmentLines(self._lines, new_lines=True)


def _row(state: NodeState, gpu: bool) -> list[RenderableType]:
    status = state.status
    running = list(state.running.values())
    if running:
        task = Text(running[0] + (f" +{len(running) - 1}" if len(running) > 1 else ""))
    else:
        task = Text("-", style="dim")
    cells: list[RenderableType] = [
        str(state.node),
        Text(status, style=_STATUS_STYLE.get(status, "")),
        _meter(state.metrics.get("cpu")),
        _meter(state.metrics.get("memory")),
    ]
    if gpu:
        cells.append(_meter(state.metrics.get("gpu")))
    done = Text(str(state.done))
    if state.failed:
        done.append(f" ({state.failed}✗)", style="red")
    cells += [done, task]
    return cells


def _meter(percent: float | None) -> Text:
    """``████░░░░░░  42%``, coloured by level; ``-`` without a value."""
    if percent is None:
        return Text("-".ljust(BAR_WIDTH + 5), style="dim")
    value = max(0.0, min(100.0, percent))
    filled = round(value / 100 * BAR_WIDTH)
    style = "green" if value < 60 else "yellow" if value < 85 else "red"
    return Text.assemble(("█" * filled, style), ("░" * (BAR_WIDTH - filled), "dim"), f" {value:3.0f}%")


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


def short_name(qualname: str) -> str:
    """A function's name for a narrow column: ``outer.<locals>.<lambda>`` → ``<lambda>``."""
    return qualname.rsplit("<locals>.", 1)[-1]
