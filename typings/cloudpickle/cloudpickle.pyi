import types
from collections.abc import Callable

_PICKLE_BY_VALUE_MODULES: set[str]

def _code_reduce(obj: types.CodeType) -> tuple[Callable[..., types.CodeType], tuple[object, ...]]: ...
