# The part of cloudpickle (3.x, which ships no type information) that skyward uses.
import pickle
from _pickle import _BufferCallback, _ReducedType
from collections import ChainMap
from collections.abc import Callable
from pickle import load as load
from pickle import loads as loads
from typing import Any

from _typeshed import SupportsWrite

from . import cloudpickle as cloudpickle

__version__: str

class CloudPickler(pickle.Pickler):
    dispatch_table: ChainMap[type, Callable[[Any], _ReducedType]]
    def __init__(
        self, file: SupportsWrite[bytes], protocol: int | None = None, buffer_callback: _BufferCallback = None
    ) -> None: ...

Pickler = CloudPickler

def dump(obj: object, file: SupportsWrite[bytes], protocol: int | None = None, buffer_callback: _BufferCallback = None) -> None: ...
def dumps(obj: object, protocol: int | None = None, buffer_callback: _BufferCallback = None) -> bytes: ...
def register_pickle_by_value(module: object) -> None: ...
def unregister_pickle_by_value(module: object) -> None: ...
