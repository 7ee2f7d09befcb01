"""Reading the clouds' JSON answers with types: ``JsonObject`` is what a JSON object
parses to, and the readers below take one field of it as the type skyward needs. An
answer of an unexpected shape (a field missing that must be there, a list where an object
belongs, text where a number belongs) raises ``CloudAnswerError`` naming the field and
the value, rather than a ``KeyError`` or ``TypeError`` somewhere later.

The readers with a ``default`` read the field as ``value or default`` does: a field that
is missing, null, empty or zero gives ``default``. Without one, the field must be there."""

from __future__ import annotations

from collections.abc import Mapping

from skyward.providers.cloud.errors import CloudAnswerError

JsonObject = Mapping[str, object]
"""A JSON object as parsed (its values are JSON values: read them with the readers)."""
Scalar = str | int | float | bool
"""A JSON value a query parameter or a plain field can hold."""

_EMPTY: JsonObject = {}


def _shown(value: object) -> str:
    return f"{value!r:.200}"


def as_object(value: object, what: str = "the answer") -> JsonObject:
    """``value`` as a JSON object; an empty answer (None, "") reads as ``{}``.
    CloudAnswerError for anything else."""
    if isinstance(value, Mapping):
        return value
    if value is None or value == "":
        return _EMPTY
    raise CloudAnswerError(f"{what} is {_shown(value)}, not a JSON object")


def as_objects(value: object, what: str = "the answer") -> list[JsonObject]:
    """``value`` as a list of JSON objects; an empty answer (None, "") reads as ``[]``.
    CloudAnswerError for anything else, or for an item that is not an object."""
    if value is None or value == "":
        return []
    if not isinstance(value, list):
        raise CloudAnswerError(f"{what} is {_shown(value)}, not a list")
    return [_object_item(item, what) for item in value]


def _object_item(item: object, what: str) -> JsonObject:
    if not isinstance(item, Mapping):
        raise CloudAnswerError(f"{what} holds {_shown(item)}, not a JSON object")
    return item


def obj(found: JsonObject, key: str) -> JsonObject:
    """The object in field ``key`` (``{}`` when missing, null or empty)."""
    value = found.get(key)
    return as_object(value, f"field {key!r}") if value else _EMPTY


def objects(found: JsonObject, key: str) -> list[JsonObject]:
    """The list of objects in field ``key`` (``[]`` when missing, null or empty)."""
    value = found.get(key)
    return as_objects(value, f"field {key!r}") if value else []


def items(found: JsonObject, key: str) -> list[object]:
    """The list in field ``key`` as it is (``[]`` when missing, null or empty)."""
    value = found.get(key)
    if not value:
        return []
    if not isinstance(value, list):
        raise CloudAnswerError(f"field {key!r} is {_shown(value)}, not a list")
    return value


def _required(found: JsonObject, key: str) -> object:
    value = found.get(key)
    if value is None:
        raise CloudAnswerError(f"field {key!r} is missing from {_shown(found)}")
    return value


def text(found: JsonObject, key: str, default: str | None = None) -> str:
    """Field ``key`` as text (a number or a boolean written out, as ``str()`` would); with
    ``default``, that when the field is missing, null or empty."""
    value = found.get(key) if default is not None else _required(found, key)
    if default is not None and not value:
        return default
    return to_text(value, key)


def to_text(value: object, key: str) -> str:
    """A JSON scalar as text; CloudAnswerError for an object or a list."""
    if isinstance(value, (str, int, float, bool)):
        return str(value)
    raise CloudAnswerError(f"field {key!r} is {_shown(value)}, not text")


def number(found: JsonObject, key: str, default: float | None = None) -> float:
    """Field ``key`` as a number (a number written as text too); with ``default``, that
    when the field is missing, null, empty or zero."""
    value = found.get(key) if default is not None else _required(found, key)
    if default is not None and not value:
        return default
    return to_number(value, key)


def number_or_none(found: JsonObject, key: str) -> float | None:
    """Field ``key`` as a number, None when it is missing or null."""
    value = found.get(key)
    return None if value is None else to_number(value, key)


def to_number(value: object, key: str) -> float:
    """A JSON number (or a number written as text) as a float; CloudAnswerError otherwise."""
    if isinstance(value, (int, float, str)):
        try:
            return float(value)
        except ValueError:
            pass
    raise CloudAnswerError(f"field {key!r} is {_shown(value)}, not a number")


def integer(found: JsonObject, key: str, default: int | None = None) -> int:
    """Field ``key`` as an integer (``int()`` of a number, or of a whole number written as
    text); with ``default``, that when the field is missing, null, empty or zero."""
    value = found.get(key) if default is not None else _required(found, key)
    if default is not None and not value:
        return default
    return to_integer(value, key)


def to_integer(value: object, key: str) -> int:
    """A JSON number (or a whole number written as text) as an int; CloudAnswerError otherwise."""
    if isinstance(value, (int, float, str)):
        try:
            return int(value)
        except (ValueError, OverflowError):
            pass
    raise CloudAnswerError(f"field {key!r} is {_shown(value)}, not a whole number")


def flag(found: JsonObject, key: str) -> bool:
    """Field ``key`` as a boolean (``bool()`` of it: missing or null is False)."""
    return bool(found.get(key))
