"""One human line per event, shared by the "log" console and the log file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from skyward.observe import events

E = TypeVar("E", bound=events.Event)


def describe(event: object) -> str:
    """The line for ``event`` ("" for an object that is not a skyward event)."""
    for renderer in _RENDERERS:
        line = renderer.render(event)
        if line is not None:
            return line
    return ""


def money(dollars: float) -> str:
    """``$0.00`` for sums of a cent or more, ``$0.0012`` below."""
    return f"${dollars:,.2f}" if dollars == 0 or dollars >= 0.01 else f"${dollars:.4f}"


def cost_line(event: events.CostFinal, provider: str = "") -> str:
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


def progress_line(event: events.Progress, per_second: float | None = None) -> str:
    """``map square: 2500/10000 (25%) 812/s``, with "done", "failed" or "interrupted"
    once finished."""
    percent = 100 * event.done / event.total if event.total else 100.0
    text = f"{event.kind} {event.name}: {event.done}/{event.total} ({percent:.0f}%)"
    if per_second:
        text += f" {rate(per_second)}"
    if event.failed:
        text += f", {event.failed} failed"
    if event.finished:
        text += ", interrupted" if event.cancelled else ", failed" if event.failed else ", done"
    return text


def plural(count: int, noun: str) -> str:
    """``1 node``, ``4 nodes``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _task(event: events.TaskCompleted) -> str:
    if event.error is None:
        return f"node {event.node}: {event.name} done in {event.duration:.2f}s"
    if event.cancelled:
        return f"node {event.node}: {event.name} cancelled after {event.duration:.2f}s"
    return f"node {event.node}: {event.name} failed after {event.duration:.2f}s: {event.error}"


class _Renderer(Protocol):
    def render(self, event: object) -> str | None: ...


class _Render(Generic[E]):
    """The line of the events of class ``kind`` (None for any other object)."""

    __slots__ = ("kind", "line")

    def __init__(self, kind: type[E], line: Callable[[E], str]) -> None:
        self.kind = kind
        self.line = line

    def render(self, event: object) -> str | None:
        return self.line(event) if isinstance(event, self.kind) else None


_RENDERERS: tuple[_Renderer, ...] = (
    _Render(events.ClusterRequested, lambda e: (
        f"pool {e.pool}: asking the pool daemon for a kept pool of {plural(e.nodes, 'node')} on {e.provider}" if e.kept
        else f"pool {e.pool}: starting {plural(e.nodes, 'node')} on {e.provider}")),
    _Render(events.ClusterProvisioned, lambda e: (
        f"pool {e.pool}: adopted the kept pool's {plural(e.nodes, 'node')} in {e.duration:.1f}s" if e.kept == "adopted"
        else f"pool {e.pool}: {plural(e.nodes, 'node')} provisioned in {e.duration:.1f}s"
        + (", kept by the pool daemon" if e.kept else ""))),
    _Render(events.BootstrapPhase, lambda e: (f"node {e.node}: " if e.node is not None else "")
        + f"bootstrap {e.phase} took {e.duration:.1f}s"),
    _Render(events.ClusterReady, lambda e: f"pool {e.pool}: ready, {plural(e.nodes, 'node')} in {e.duration:.1f}s"),
    _Render(events.ClusterDestroyed, lambda e: (
        f"pool {e.pool}: let go after {e.duration:.1f}s; the pool daemon keeps it" if e.kept
        else f"pool {e.pool}: stopped after {e.duration:.1f}s")),
    _Render(events.ClusterResized,
            lambda e: f"pool {e.pool}: {plural(e.nodes, 'node')} up, {e.target} wanted ({e.reason})"),
    _Render(events.InstanceProvisioned, lambda e: f"node {e.node}: provisioned ({e.instance_id}"
        + (f", {e.ip}" if e.ip else "") + (", spot" if e.spot else "") + ")"),
    _Render(events.InstanceBootstrapped, lambda e: f"node {e.node}: up in {e.duration:.1f}s"),
    _Render(events.InstancePreempted, lambda e: f"node {e.node}: preempted" + (f" ({e.reason})" if e.reason else "")),
    _Render(events.InstanceReplaced, lambda e: f"node {e.node}: replaced ({e.reason})"),
    _Render(events.InstanceDestroyed, lambda e: f"node {e.node}: stopped"),
    _Render(events.TaskStarted, lambda e: f"node {e.node}: {e.name} started ({e.task_id})"),
    _Render(events.BroadcastStarted,
            lambda e: f"broadcast {e.name} ({e.task_id}) to nodes {', '.join(map(str, e.nodes))}"),
    _Render(events.TaskCompleted, _task),
    _Render(events.Progress, progress_line),
    _Render(events.Log, lambda e: f"[node {e.node}] {e.line}"),
    _Render(events.Metric, lambda e: f"node {e.node}: {e.name} {e.value:.1f}{e.unit}"),
    _Render(events.Error, lambda e: (f"node {e.node}: " if e.node is not None else "") + f"error: {e.message}"),
    _Render(events.CostUpdate, lambda e: f"cost so far {money(e.accumulated_cost)} after {e.elapsed_seconds:.0f}s "
        f"at {money(e.hourly_rate)}/h"),
    _Render(events.CostFinal, lambda e: f"cost {cost_line(e)} over {e.total_seconds:.1f}s"),
)
