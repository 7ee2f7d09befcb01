"""Consoles fed with event objects: mode choice, "log" lines, "minimal", the rich panel."""

from __future__ import annotations

import re
import time

import pytest
from rich.console import Console as RichTerminal

import skyward as sky
from skyward.observe.bus import EventBus
from skyward.observe.console import MinimalConsole, SilentConsole, open_console, resolve_mode
from skyward.observe.describe import describe
from skyward.observe.log_console import LogConsole
from skyward.observe.rich_console import RichConsole

LINE = re.compile(r"^\d\d:\d\d:\d\d \S")


def pool_life(bus: EventBus, nodes: int = 2, failing: bool = False) -> None:
    """Emit the events of a short pool life with one map of 10 items."""
    bus.emit(sky.ClusterRequested("p", "local", nodes))
    bus.emit(sky.ClusterProvisioned("p", nodes, 1.0))
    bus.emit(sky.BootstrapPhase("engine", 0.8))
    for node in range(nodes):
        bus.emit(sky.InstanceProvisioned(node, f"i-{node}", "127.0.0.1"))
        bus.emit(sky.InstanceBootstrapped(node, f"i-{node}", 1.0))
    bus.emit(sky.ClusterReady("p", nodes, 1.2))
    for node in range(nodes):
        bus.emit(sky.Metric(node, "cpu", 40.0 + node * 30, "%"))
        bus.emit(sky.Metric(node, "memory", 20.0, "%"))
    bus.emit(sky.Progress("b1", "map", "square", 0, 10))
    bus.emit(sky.TaskStarted("t1", "square", 0, 6))
    bus.emit(sky.TaskStarted("t2", "square", 1, 4))
    bus.emit(sky.Log(0, "hello from a task"))
    bus.emit(sky.TaskCompleted("t1", "square", 0, 0.5, None, 6))
    bus.emit(sky.Progress("b1", "map", "square", 6, 10))
    if failing:
        bus.emit(sky.TaskCompleted("t2", "square", 1, 0.1, "ValueError: bad item"))
        bus.emit(sky.Progress("b1", "map", "square", 6, 10, failed=4, finished=True))
    else:
        bus.emit(sky.TaskCompleted("t2", "square", 1, 0.4, None, 4))
        bus.emit(sky.Progress("b1", "map", "square", 10, 10, finished=True))
    bus.emit(sky.CostFinal(0.0, 3.0, 0.0, 0, nodes))
    bus.emit(sky.ClusterDestroyed("p", 3.5))


def test_rich_needs_a_terminal_on_stderr() -> None:
    assert resolve_mode(True, stderr_tty=True) == "rich"
    assert resolve_mode("rich", stderr_tty=True) == "rich"
    assert resolve_mode(True, stderr_tty=False) == "log"
    assert resolve_mode("rich", stderr_tty=False) == "log"
    assert resolve_mode("log", stderr_tty=True) == "log"
    assert resolve_mode("minimal") == "minimal"
    assert resolve_mode(False) == "silent" and resolve_mode("silent") == "silent"


def test_open_console_under_pytest_is_never_rich() -> None:
    bus = EventBus()
    assert isinstance(open_console(True, bus.on), LogConsole)  # pytest captures stderr
    assert isinstance(open_console("minimal", bus.on), MinimalConsole)
    assert isinstance(open_console(False, bus.on), SilentConsole)


def test_log_console_writes_timestamped_plain_lines(capsys) -> None:
    bus = EventBus()
    console = LogConsole(bus.on)
    pool_life(bus, failing=True)
    console.close()
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert all(LINE.match(line) for line in lines), lines
    assert "\x1b" not in err + out
    text = "\n".join(lines)
    assert "pool p: starting 2 nodes on local" in text
    assert "bootstrap engine took 0.8s" in text
    assert "node 1: up in 1.0s" in text
    assert "node 1: square failed after 0.10s: ValueError: bad item" in text
    assert "map square: 6/10 (60%)" in text and "4 failed, failed" in text
    assert "cost $0.00 (no charge)" in text
    assert lines[-1].endswith("pool p: 2 nodes, 2 tasks (1 failed), 6 items mapped, wall 3.5s, "
                              "cost $0.00 (local pool, no charge)")
    assert re.search(r"^\d\d:\d\d:\d\d \[node 0\] hello from a task$", out, re.M)


def test_log_console_stops_writing_once_closed(capsys) -> None:
    bus = EventBus()
    LogConsole(bus.on).close()
    pool_life(bus)
    assert capsys.readouterr() == ("", "")


def test_minimal_console_prints_task_output_and_errors_only(capsys) -> None:
    bus = EventBus()
    console = MinimalConsole(bus.on)
    pool_life(bus)
    bus.emit(sky.Error("disk full", node=1))
    bus.emit(sky.Log(1, "oops", "stderr"))
    console.close()
    out, err = capsys.readouterr()
    assert out == "[node 0] hello from a task\n"
    assert err.splitlines()[0].endswith("node 1: error: disk full")
    assert err.splitlines()[1] == "[node 1] oops"


def test_rich_panel_shows_nodes_table_and_progress_bar() -> None:
    bus = EventBus()
    terminal = RichTerminal(record=True, width=100, force_terminal=True, color_system="truecolor")
    view = RichConsole(bus.on, console=terminal, live=False)
    bus.emit(sky.ClusterRequested("p", "local", 2))
    for node in range(2):
        bus.emit(sky.InstanceProvisioned(node, f"i-{node}"))
        bus.emit(sky.InstanceBootstrapped(node, f"i-{node}", 1.0))
        bus.emit(sky.Metric(node, "cpu", 50.0 + 40 * node, "%"))
        bus.emit(sky.Metric(node, "memory", 25.0, "%"))
    bus.emit(sky.ClusterReady("p", 2, 1.2))
    bus.emit(sky.TaskStarted("t1", "square", 0))
    bus.emit(sky.Progress("b1", "map", "square", 0, 400))
    bus.emit(sky.Progress("b1", "map", "square", 150, 400))
    terminal.print(view.renderable())
    view.close()
    text = terminal.export_text()
    assert "skyward · p · local · 2/2 nodes · ready" in text
    assert re.search(r"node\s+state\s+cpu\s+mem\s+done\s+task", text)
    assert re.search(r"0\s+busy\s+█████░░░░░\s+50%\s+██░░░░░░░░\s+25%\s+0\s+square", text)
    assert re.search(r"1\s+idle\s+█████████░\s+90%", text)
    assert re.search(r"map square\s+━+.*150/400", text)


def test_rich_panel_of_a_thousand_nodes_shows_the_busiest_and_those_in_trouble() -> None:
    bus = EventBus()
    terminal = RichTerminal(record=True, width=120)
    view = RichConsole(bus.on, console=terminal, live=False)
    bus.emit(sky.ClusterRequested("p", "simulated", 1000))
    for node in range(1000):
        bus.emit(sky.InstanceBootstrapped(node, f"i-{node}", 1.0))
        bus.emit(sky.Metric(node, "cpu", 97.0 if node in (500, 900) else 10.0, "%"))
    bus.emit(sky.InstanceReplaced(777, "lost"))
    bus.emit(sky.TaskStarted("t1", "square", 321))
    terminal.print(view.renderable())
    view.close()
    text = terminal.export_text()
    rows = [int(found[1]) for line in text.splitlines() if (found := re.search(r"│\s*(\d+)\s+(idle|busy|replaced)", line))]
    assert len(rows) == 16 and {321, 500, 777, 900} <= set(rows), "in trouble, running, then the busiest"
    assert rows == sorted(rows)
    assert "… 984 more nodes; all 1000: 998 idle · 1 busy · 1 replaced" in text


def test_a_live_panel_draws_its_nodes_table_once_a_second_and_afresh_as_it_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[float] = []
    draw = RichConsole._nodes_table

    def counted(self: RichConsole) -> object:
        drawn.append(time.monotonic())
        return draw(self)

    monkeypatch.setattr(RichConsole, "_nodes_table", counted)
    bus = EventBus()
    terminal = RichTerminal(record=True, width=100, force_terminal=True)
    view = RichConsole(bus.on, console=terminal)  # live: the panel is drawn 4 times a second
    bus.emit(sky.ClusterRequested("p", "local", 1))
    bus.emit(sky.InstanceBootstrapped(0, "i-0", 1.0))
    bus.emit(sky.Metric(0, "cpu", 10.0, "%"))
    time.sleep(2.2)
    bus.emit(sky.Metric(0, "cpu", 90.0, "%"))
    view.close()
    assert 1 <= len(drawn) <= 4, f"the table drawn {len(drawn)} times in 2.2 s, at most once a second and at the close"
    last = terminal.export_text().rsplit("skyward · p", 1)[1]
    assert re.search(r"0\s+idle\s+█████████░\s+90%", last), last


def test_rich_panel_before_any_node_shows_a_spinner_and_gpu_only_when_reported() -> None:
    bus = EventBus()
    terminal = RichTerminal(record=True, width=80)
    view = RichConsole(bus.on, console=terminal, live=False)
    bus.emit(sky.ClusterRequested("p", "local", 3))
    terminal.print(view.renderable())
    assert "starting 3 nodes on local" in terminal.export_text()
    bus.emit(sky.InstanceBootstrapped(0, "i-0", 1.0))
    bus.emit(sky.Metric(0, "gpu", 75.0, "%"))
    terminal.print(view.renderable())
    assert re.search(r"node\s+state\s+cpu\s+mem\s+gpu", terminal.export_text())


def test_every_event_has_a_line() -> None:
    samples = [
        sky.ClusterRequested("p", "local", 1), sky.ClusterProvisioned("p", 1, 1.0),
        sky.BootstrapPhase("pip", 3.0, node=2), sky.ClusterReady("p", 1, 1.0), sky.ClusterDestroyed("p", 2.0),
        sky.InstanceProvisioned(0, "i-0", "10.0.0.1", spot=True), sky.InstanceBootstrapped(0, "i-0", 1.0),
        sky.InstancePreempted(0, "i-0", "spot reclaimed"), sky.InstanceReplaced(0, "agent died"),
        sky.InstanceDestroyed(0, "i-0"), sky.TaskStarted("t1", "f", 0), sky.TaskCompleted("t1", "f", 0, 0.1),
        sky.Progress("b", "gather", "f", 1, 2), sky.Log(0, "hi"), sky.Metric(0, "cpu", 5.0, "%"),
        sky.Error("bad"), sky.CostUpdate(60.0, 0.04, 2.4), sky.CostFinal(0.5, 600.0, 3.0, 1, 0, 0.25),
    ]
    lines = [describe(event) for event in samples]
    assert all(lines)
    assert "node 2: bootstrap pip took 3.0s" in lines
    assert "node 0: provisioned (i-0, 10.0.0.1, spot)" in lines
    assert lines[-1] == "cost $0.50 at $3.00/h, saved $0.25 vs on-demand over 600.0s"
    assert describe(object()) == ""
