"""A pool's log file (``observe.event_log``'s lines) as records, and those records as
JSON lines, a Markdown report or a Jupyter notebook (``sky logs NAME --export``).

A line is ``DATE TIME LEVEL LOGGER: MESSAGE``. Events come from ``EVENTS_LOGGER``, a
task's output from ``TASK_LOGGER`` as ``[node N] text``; any other logger is a "log"
record. A line that does not start so (a traceback's) continues the record before it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from skyward.observe.log_names import EVENTS_LOGGER, TASK_LOGGER

FORMATS = ("jsonl", "md", "ipynb")
_LINE = re.compile(r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?) (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)$")
_NODE = re.compile(r"^\[node (?P<node>\d+)(?P<stderr> stderr)?\] ?(?P<text>.*)$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a pool's log: ``kind`` is "event", "output" (a task's, with its
    ``node`` and ``stream``, "stdout" or "stderr") or "log"."""

    time: str
    level: str
    kind: str
    message: str
    node: int | None = None
    stream: str | None = None


def records(lines: Iterable[str]) -> list[LogRecord]:
    """The records of a pool log's ``lines`` (see the module)."""
    found: list[LogRecord] = []
    for line in lines:
        matched = _LINE.match(line)
        if matched is None:
            if found:
                last = found[-1]
                found[-1] = LogRecord(last.time, last.level, last.kind, f"{last.message}\n{line}", last.node, last.stream)
            continue
        logger, message = matched["logger"], matched["message"]
        if logger == TASK_LOGGER and (node := _NODE.match(message)) is not None:
            stream = "stderr" if node["stderr"] else "stdout"
            found.append(LogRecord(matched["time"], matched["level"], "output", node["text"], int(node["node"]), stream))
        else:
            kind = "event" if logger == EVENTS_LOGGER else "log"
            found.append(LogRecord(matched["time"], matched["level"], kind, message))
    return found


def as_jsonl(found: Sequence[LogRecord]) -> str:
    """One JSON object per record, per line."""
    return "".join(json.dumps(asdict(record)) + "\n" for record in found)


def as_markdown(found: Sequence[LogRecord], title: str) -> str:
    """A report: the events (and other log records) as a table, then each node's output
    as a block of text."""
    parts = [f"# {title}\n"]
    events = [record for record in found if record.kind != "output"]
    if events:
        parts.append("## Events\n\n| time | level | message |\n| --- | --- | --- |")
        parts += [f"| {record.time} | {record.level} | {_cell(record.message)} |" for record in events]
        parts.append("")
    for node, lines in _outputs(found):
        fence = "````" if any("```" in line for line in lines) else "```"
        parts += [f"## Output of node {node}\n", f"{fence}text", *lines, fence, ""]
    return "\n".join(parts)


def as_notebook(found: Sequence[LogRecord], title: str) -> str:
    """A Jupyter notebook (nbformat 4.5): a Markdown cell with the title and the events'
    table, then per node a Markdown heading and a code cell holding that node's output
    as its stream output (nothing to run)."""
    cells: list[dict[str, object]] = [_markdown_cell("title", as_markdown([r for r in found if r.kind != "output"], title))]
    for node, streams in _streams(found):
        cells.append(_markdown_cell(f"node-{node}", f"## Output of node {node}"))
        cells.append({
            "cell_type": "code", "id": f"node-{node}-output", "metadata": {}, "execution_count": None,
            "source": f"# the output of node {node}'s tasks",
            "outputs": [
                {"output_type": "stream", "name": stream, "text": "".join(line + "\n" for line in lines)}
                for stream, lines in streams
            ],
        })
    notebook = {
        "cells": cells,
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(notebook, indent=1) + "\n"


def export(found: Sequence[LogRecord], form: str, title: str) -> str:
    """``found`` in ``form`` (one of ``FORMATS``). ValueError naming the formats for another."""
    if form == "jsonl":
        return as_jsonl(found)
    if form == "md":
        return as_markdown(found, title)
    if form == "ipynb":
        return as_notebook(found, title)
    raise ValueError(f"export format {form!r}: use one of {', '.join(FORMATS)}")


def _outputs(found: Sequence[LogRecord]) -> list[tuple[int, list[str]]]:
    """Each node's output lines (stderr's marked so), nodes in order."""
    return [
        (node, [line if stream == "stdout" else f"[stderr] {line}" for stream, lines in streams for line in lines])
        for node, streams in _streams(found)
    ]


def _streams(found: Sequence[LogRecord]) -> list[tuple[int, list[tuple[str, list[str]]]]]:
    """Each node's output as runs of lines of one stream, in the order written; nodes in order."""
    by_node: dict[int, list[tuple[str, list[str]]]] = {}
    for record in found:
        if record.kind == "output" and record.node is not None:
            runs = by_node.setdefault(record.node, [])
            stream = record.stream or "stdout"
            if not runs or runs[-1][0] != stream:
                runs.append((stream, []))
            runs[-1][1].extend(record.message.splitlines() or [""])
    return sorted(by_node.items())


def _cell(text: str) -> str:
    """``text`` inside a Markdown table cell: markup escaped, lines joined by ``<br>``."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace("\\", "\\\\").replace("|", "\\|")
    return escaped.replace("`", "\\`").replace("\n", "<br>")


def _markdown_cell(cell_id: str, text: str) -> dict[str, object]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}
