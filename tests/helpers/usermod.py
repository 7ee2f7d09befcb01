"""A user module: functions and classes defined outside __main__, imported by tests."""

from __future__ import annotations

import skyward as sky


class UserError(Exception):
    """An exception class defined in a user's module."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@sky.function
def raise_user_error(code: int) -> None:
    raise UserError(f"failed with {code}", code)


@sky.function
def make_point(x: int, y: int) -> Point:
    return Point(x, y)


def triple(x: int) -> int:
    return 3 * x
