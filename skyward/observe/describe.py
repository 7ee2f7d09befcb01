"""One human line per event, shared by the "log" console and the log file."""

from __future__ import annotations

from typing import Any

from skyward.observe.events import (
    BootstrapPhase,
    BroadcastStarted,
    ClusterDestroyed,
    ClusterProvisioned,
    ClusterReady,
    ClusterRequested,
    ClusterResized,
    CostFinal,
    CostUpdate,
    Error,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstancePreempted,
    InstanceProvisioned,
    InstanceReplaced,
    Log,
    Metric,
    Progress,
    TaskCompleted,
    TaskStarted,
)


def describe(event: Any) -> str:
    """The line for ``event`` ("" for an object that is not a skyward event)."""
    for kind, render in _RENDERERS:
        if isinstance(event, kind):
            return render(event)
    return ""


def money(dollars: float) -> str:
    """``$0.00`` for sums of a cent or more, ``$0.0012`` below."""
    return f"${dollars:,.2f}" if dollars == 0 or dollars >= 0.01 else f"${dollars:.4f}"


def cost_line(event: CostFinal, provider: str = "") -> str:
    """The summary's cost part: "$0.00 (local pool, no charge)" or "$1.23 at $2.40/h ..."."""
    if event.hourly_rate == 0:
        where = f"{provider} pool, " if provider else ""
        return f"{money(0)} ({where}no charge)"
    text = f"{money(event.total_cost)} at {money(event.hourly_rate)}/h"
    if event.savings_vs_ondemand > 0:
        text += f", saved {money(event.savings_vs_ondemand)} vs on-demand"
    return text


def rate(per_second: float) -> str:
    """``812/s`` from 100 up, ``3.5/s`` below."""
    return f"{per_second:,.0f}/s" if per_second >= 100 else f"{per_second:.1f}/s"


def progress_line(event: Progress, per_second: float | None = None) -> str:
    """``map square: 2500/10000 (25%) 812/s``, with "done"/"failed" once finished."""
    percent = 100 * event.done / event.total if event.total else 100.0
    text = f"{event.kind} {event.name}: {event.done}/{event.total} ({percent:.0f}%)"
    if per_second:
        text += f" {rate(per_second)}"
    if event.failed:
        text += f", {event.failed} failed"
    if event.finished:
        text += ", failed" if event.failed else ", done"
    return text


def plural(count: int, noun: str) -> str:
    """``1 node``, ``4 nodes``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _task(event: TaskCompleted) -> str:
    if event.error is None:
        return f"node {event.node}: {event.name} done in {event.duration:.2f}s"
    return f"node {event.node}: {event.name} failed after {event.duration:.2f}s: {event.error}"


_RENDERERS: tuple[tuple[type, Any], ...] = (
    (ClusterRequested, lambda e: f"pool {e.pool}: starting {plural(e.nodes, 'node')} on {e.provider}"),
    (ClusterProvisioned, lambda e: f"pool {e.pool}: {plural(e.nodes, 'node')} provisioned in {e.duration:.1f}s"),
    (BootstrapPhase, lambda e: (f"node {e.node}: " if e.node is not None else "")
        + f"bootstrap {e.phase} took {e.duration:.1f}s"),
    (ClusterReady, lambda e: f"pool {e.pool}: ready, {plural(e.nodes, 'node')} in {e.duration:.1f}s"),
    (ClusterDestroyed, lambda e: f"pool {e.pool}: stopped after {e.duration:.1f}s"),
    (ClusterResized, lambda e: f"pool {e.pool}: {plural(e.nodes, 'node')} up, {e.target} wanted ({e.reason})"),
    (InstanceProvisioned, lambda e: f"node {e.node}: provisioned ({e.instance_id}"
        + (f", {e.ip}" if e.ip else "") + (", spot" if e.spot else "") + ")"),
    (InstanceBootstrapped, lambda e: f"node {e.node}: up in {e.duration:.1f}s"),
    (InstancePreempted, lambda e: f"node {e.node}: preempted" + (f" ({e.reason})" if e.reason else "")),
    (InstanceReplaced, lambda e: f"node {e.node}: replaced ({e.reason})"),
    (InstanceDestroyed, lambda e: f"node {e.node}: stopped"),
    (TaskStarted, lambda e: f"node {e.node}: {e.name} started ({e.task_id})"),
    (BroadcastStarted, lambda e: f"broadcast {e.name} ({e.task_id}) to nodes {', '.join(map(str, e.nodes))}"),
    (TaskCompleted, _task),
    (Progress, progress_line),
    (Log, lambda e: f"[node {e.node}] {e.line}"),
    (Metric, lambda e: f"node {e.node}: {e.name} {e.value:.1f}{e.unit}"),
    (Error, lambda e: (f"node {e.node}: " if e.node is not None else "") + f"error: {e.message}"),
    (CostUpdate, lambda e: f"cost so far {money(e.accumulated_cost)} after {e.elapsed_seconds:.0f}s "
        f"at {money(e.hourly_rate)}/h"),
    (CostFinal, lambda e: f"cost {cost_line(e)} over {e.total_seconds:.1f}s"),
)
