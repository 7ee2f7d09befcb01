"""``sky providers check CLOUD --launch``: one real machine on a cloud, end to end.

Nothing of ours has run on a real cloud account (the tests use emulators and fakes), so
this is the one command a user runs to find out: it picks the cheapest CPU machine the
cloud sells (or the cheapest with ``--accelerator``), says what it will cost and asks
(``--yes`` for scripts), opens a one-node pool on it, runs a task that reads
``instance_info()``, tears the machine down with the provider's confirmation, and
reports each phase's time, the cost and, when something failed, the API calls that
answered an error. Ctrl-C at any point tears down what was made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from skyward.api.compute import Compute
from skyward.core.accelerators import Accelerator, parse_accelerator
from skyward.core.function import function
from skyward.core.instance import instance_info
from skyward.model.spec import Options, Spec
from skyward.observe.events import BootstrapPhase, ClusterProvisioned, CostFinal
from skyward.providers.base import Offer, Provider
from skyward.providers.cloud.http import FailedCall, failed_calls

CHECK_TTL = 900
"""The machine's dead-man switch (seconds without the client): a check that loses its
client still ends within 15 minutes."""
ESTIMATE_MINUTES = 10
"""How long a check is assumed to hold the machine, for the estimate shown before it asks."""


@dataclass(frozen=True, slots=True)
class Phase:
    """One step of the check and how long it took."""

    name: str
    seconds: float


@dataclass(slots=True)
class Report:
    """What a launch check found; ``error`` None when every step passed."""

    cloud: str
    pool: str = ""
    """The pool's id (``sky gc`` names it, should anything be left)."""
    offer: Offer | None = None
    phases: list[Phase] = field(default_factory=list)
    node: dict[str, object] = field(default_factory=dict)
    cost: float | None = None
    error: str | None = None
    failed_calls: list[FailedCall] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


@function
def describe_node() -> dict[str, object]:
    """What the node says about itself (the task of the check)."""
    info = instance_info()
    if info is None:
        raise RuntimeError("instance_info() is None on the node")
    return {"node": info.node, "total_nodes": info.total_nodes, "hostname": _hostname(), "accelerators": info.accelerators}


def _hostname() -> str:
    import socket

    return socket.gethostname()


def choose(provider: Provider, accelerator: str | Accelerator | None) -> tuple[Spec, Offer]:
    """The one-node Spec of the check and the offer it will launch: the cheapest x86_64
    CPU machine, or the cheapest with ``accelerator`` (a name as skyward.toml writes it).
    ValueError saying what to pass when the cloud has no such machine."""
    wanted = parse_accelerator(accelerator) if isinstance(accelerator, str) else accelerator
    spec = Spec(
        provider=provider, nodes=1, accelerator=wanted, architecture="x86_64", allocation="on-demand", ttl=CHECK_TTL,
    )
    provider.validate(spec, Options())
    found = provider.offers(spec)
    if not found:
        what = f"a machine with {accelerator}" if accelerator else "a CPU-only machine"
        hint = "name another with --accelerator" if accelerator else "name a GPU it sells with --accelerator (e.g. L4)"
        raise ValueError(f"{provider.name} offers no on-demand {what} now; {hint}")
    return spec, found[0]


def run(
    provider: Provider, accelerator: str | Accelerator | None, confirm: Callable[[Offer], bool], say: Callable[[str], None],
) -> Report:
    """The check (see the module docstring). ``confirm`` is asked before anything is
    created; ``say`` gets progress lines. Never raises for a failed step: the report
    holds the error (a KeyboardInterrupt is re-raised once the machine is torn down)."""
    report = Report(provider.name)
    with failed_calls() as failures:
        try:
            _check(provider, accelerator, confirm, say, report)
        except KeyboardInterrupt:
            report.error = "interrupted (Ctrl-C); what was created is torn down"
            raise
        except Exception as exc:  # reported: the report is the product of the check
            report.error = f"{type(exc).__name__}: {exc}"
        finally:
            report.failed_calls = list(failures)
    return report


def _check(
    provider: Provider, accelerator: str | Accelerator | None, confirm: Callable[[Offer], bool], say: Callable[[str], None],
    report: Report,
) -> None:
    started = time.monotonic()
    spec, offer = choose(provider, accelerator)
    report.offer = offer
    report.phases.append(Phase("offers", time.monotonic() - started))
    if not confirm(offer):
        report.error = "not confirmed: nothing was created (pass --yes to confirm from a script)"
        return
    pool = Compute(spec, options=Options(console=False, logging=False))
    report.pool = pool.id
    pool.on(ClusterProvisioned, lambda event: report.phases.append(Phase("provision", event.duration)))
    pool.on(BootstrapPhase, lambda event: report.phases.append(Phase(f"  {event.phase}", event.duration)))
    pool.on(CostFinal, lambda event: setattr(report, "cost", event.total_cost))
    say(f"opening one {offer.instance_type} on {provider.name} ...")
    opened = time.monotonic()
    with pool:
        report.phases.append(Phase("open (total)", time.monotonic() - opened))
        say("running a task ...")
        ran = time.monotonic()
        report.node = describe_node() >> pool
        report.phases.append(Phase("task", time.monotonic() - ran))
        say("tearing down ...")
        closing = time.monotonic()
    report.phases.append(Phase("teardown (confirmed)", time.monotonic() - closing))


def estimate(offer: Offer) -> float:
    """Dollars for ``ESTIMATE_MINUTES`` of ``offer`` (a cloud may bill a minimum period)."""
    return offer.hourly_price * ESTIMATE_MINUTES / 60
