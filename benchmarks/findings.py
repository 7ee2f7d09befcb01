"""Why a missed target is missed and what would close it: what profiling found, per target.

``explain`` returns a section for each target this run missed; the text for a target
is kept here, next to the measurements that support it.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.common import Check, Row

EXPLANATIONS: dict[str, str] = {}

UNEXPLAINED = (
    "No analysis is recorded for this target yet. Profile the skyward subject "
    "(`py-spy record -o profile.svg --subprocesses -- .venv/bin/python -m benchmarks.isolate ...`)."
)


def explain(checks: Sequence[Check], rows: Sequence[Row]) -> list[tuple[str, str]]:
    """(title, text) for every missed target, in target order."""
    return [
        (f"{check['id']}: {check['target']} (measured {check['measured']})",
         EXPLANATIONS.get(check["id"], UNEXPLAINED))
        for check in checks
        if check["passed"] is False
    ]
