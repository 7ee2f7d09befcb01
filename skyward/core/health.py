"""``sky.HealthChecker``: a check run on every node, and replacing the nodes that keep
failing it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from msgspec import Struct

from skyward.core.instance import InstanceInfo, instance_info
from skyward.core.validation import check_flag, check_number, fail


@dataclass(frozen=True, slots=True)
class HealthChecker:
    """Runs a check on each node every ``interval`` seconds, beside its tasks (a check
    takes no task slot); a node whose checks fail ``failures`` times in a row is replaced
    (an ``InstanceReplaced`` event names the last failure). Checks of a node start
    ``warmup`` seconds after it joined; a check with no answer within ``timeout`` seconds
    fails. Either form, not both:

    - ``check``: takes no argument; it fails when it raises or returns a false value.
    - ``fn`` (the later reference's form): takes the node's ``InstanceInfo`` and returns
      True (healthy), False, or a string saying why the node is unhealthy.
      ``consecutive_failures`` and ``initial_delay`` are that form's names for
      ``failures`` and ``warmup``.

    With ``gate=True`` (a warming gate) the pool is not ready, and its ``with`` block
    does not start, until every node has passed one check: each is checked every second
    from the moment its agent answers, for up to ``warmup`` seconds; a node still
    failing then fails the open with a TimeoutError naming it and its last failure. The
    gate holds the opening only: a node that joins later (a replacement, a scale-up)
    takes tasks at once, its checks starting after ``warmup`` as without the gate.

    Either must be picklable (defined at module level, or a lambda cloudpickle can send).
    TypeError/ValueError name the field when a value is not valid."""

    check: Callable[[], object] | None = None
    interval: float = 30.0
    failures: int = 3
    warmup: float = 60.0
    timeout: float = 10.0
    fn: Callable[[InstanceInfo], bool | str] | None = None
    consecutive_failures: int | None = None
    initial_delay: float | None = None
    gate: bool = False

    def __post_init__(self) -> None:
        if (self.check is None) == (self.fn is None):
            raise fail(
                "HealthChecker", "check", self.check,
                "give check= (a function taking no arguments) or fn= (one taking InstanceInfo), one of them",
            )
        for name in ("check", "fn"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise fail("HealthChecker", name, value, "give a function")
        self._alias("consecutive_failures", "failures", 3)
        self._alias("initial_delay", "warmup", 60.0)
        check_number("HealthChecker", "interval", self.interval, strictly_positive=True, finite=True)
        check_number("HealthChecker", "failures", self.failures, minimum=1, integer=True)
        check_number("HealthChecker", "warmup", self.warmup, minimum=0, finite=True)
        check_number("HealthChecker", "timeout", self.timeout, strictly_positive=True, finite=True)
        check_flag("HealthChecker", "gate", self.gate)

    def _alias(self, alias: str, field: str, default: float) -> None:
        value = getattr(self, alias)
        if value is None:
            return
        if getattr(self, field) != default:
            raise fail("HealthChecker", alias, value, f"it is another name for {field}=; give one of them")
        object.__setattr__(self, field, value)

    @property
    def name(self) -> str:
        """The check's name as events and errors show it."""
        check = self.check if self.check is not None else self.fn
        return getattr(check, "__qualname__", None) or repr(check)

    def probe(self) -> Callable[[], object]:
        """The function a node runs for one check."""
        if self.check is not None:
            return self.check
        assert self.fn is not None
        return _WithInfo(self.fn)

    def failure(self, answer: object) -> str | None:
        """Why ``answer`` (what ``probe()`` returned) is a failed check, or None when the
        node is healthy."""
        if self.fn is not None and isinstance(answer, str):
            return answer or "it returned an empty reason"
        return None if answer else f"it returned {answer!r}"


class _WithInfo(Struct, frozen=True):
    """``fn(instance_info())`` on the node: the later form's check."""

    fn: Callable[[InstanceInfo], bool | str]

    def __repr__(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)

    def __call__(self) -> bool | str:
        info = instance_info()
        if info is None:
            raise RuntimeError("the health check ran outside a node: instance_info() is None")
        return self.fn(info)
