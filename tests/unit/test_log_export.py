"""``observe.log_export``: a pool log's lines as records and in each export format."""

from __future__ import annotations

import json

import nbformat
import pytest

from skyward.observe import log_export

LOG = """\
2026-11-28 13:43:10,560 INFO skyward.events: pool dev: starting 2 nodes on local
2026-11-28 13:43:11,001 INFO skyward.task: [node 1] a | b <i>
2026-11-28 13:43:11,002 INFO skyward.task: [node 0] ```fenced```
2026-11-28 13:43:11,003 INFO skyward.task: [node 0 stderr] a warning
2026-11-28 13:43:12 ERROR skyward.events: node 0: task failed
Traceback (most recent call last):
  File "x.py", line 1
2026-11-28 13:43:13 WARNING skyward.engine: something else
"""


def test_lines_become_records_and_a_traceback_stays_with_its_record() -> None:
    found = log_export.records(LOG.splitlines())
    assert [(r.kind, r.node, r.stream) for r in found] == [
        ("event", None, None), ("output", 1, "stdout"), ("output", 0, "stdout"), ("output", 0, "stderr"),
        ("event", None, None), ("log", None, None),
    ]
    assert found[1].message == "a | b <i>" and found[4].level == "ERROR"
    assert found[4].message.splitlines() == ["node 0: task failed", "Traceback (most recent call last):", '  File "x.py", line 1']
    assert log_export.records(["no time here"]) == []


def test_each_format() -> None:
    found = log_export.records(LOG.splitlines())
    lines = [json.loads(line) for line in log_export.export(found, "jsonl", "t").splitlines()]
    assert lines[1] == {"time": "2026-11-28 13:43:11,001", "level": "INFO", "kind": "output", "message": "a | b <i>",
                        "node": 1, "stream": "stdout"}
    report = log_export.export(found, "md", "Pool dev")
    assert report.startswith("# Pool dev\n") and "| node 0: task failed<br>Traceback" in report
    assert "a \\| b &lt;i>" not in report.split("## Output")[0], "output lines are not in the events' table"
    assert report.index("## Output of node 0") < report.index("## Output of node 1")
    assert "````text\n```fenced```\n[stderr] a warning\n````" in report, "a fence inside the output gets a longer fence"
    notebook = nbformat.reads(log_export.export(found, "ipynb", "Pool dev"), as_version=4)
    nbformat.validate(notebook)
    streams = [[(output["name"], output["text"]) for output in cell.outputs] for cell in notebook.cells if cell.cell_type == "code"]
    assert streams == [[("stdout", "```fenced```\n"), ("stderr", "a warning\n")], [("stdout", "a | b <i>\n")]]
    with pytest.raises(ValueError, match="use one of jsonl, md, ipynb"):
        log_export.export(found, "html", "t")
