"""``DispatchOperand``: what stands right of the dispatch operators (``sky.Pool`` and
the ``skyward`` module itself), for a left side that is not a pending call."""

from __future__ import annotations

from typing import NoReturn


class DispatchOperand:
    """The right side of ``f(x) >> target``, ``f(x) @ target`` and ``f(x) > target``. A
    pending call on the left handles those itself; these reflected methods run only
    when the left side is something else, and raise the TypeError that the subclass's
    ``_wrong_left(value, operator)`` makes (saying the fix)."""

    __slots__ = ()

    def _wrong_left(self, value: object, operator: str) -> TypeError:
        raise NotImplementedError

    def __rrshift__(self, other: object) -> NoReturn:
        raise self._wrong_left(other, ">>")

    def __rmatmul__(self, other: object) -> NoReturn:
        raise self._wrong_left(other, "@")

    def __lt__(self, other: object) -> NoReturn:
        raise self._wrong_left(other, ">")
