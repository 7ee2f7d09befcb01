"""Functions that travel by value (defined in the user's script, a notebook or another
module the nodes lack) sent to each node once and referred to by their digest after.

cloudpickle ships such a function's code and globals with every request: about 100 µs
of pickling on the client and 25 µs of rebuilding on the node for a one-line function,
more than the rest of a round trip. The client keeps each such function's pickle, and
a node keeps the function it rebuilt, under the digest of that pickle; the next request
to that node carries only the digest.

A kept pickle is used only while it is what cloudpickle would make now, checked on every
call by identity: the function's code, name, defaults, closure cells and every global
it reads (those of the by-value functions it calls too) must be the very objects they
were. So rebinding a global (``SCALE = 4``) or redefining the function in a notebook
takes effect on the next call, as it always did. A function is shipped in full on every
call, as before, when it reads a value that can change in place (a list, a dict, an
object, a class defined in the script), writes a global (``global n``, which starts from
the client's value on each call) or carries attributes of its own.

A node that lacks a digest (its agent was restarted, or it dropped the function from
its bounded store) refuses the request with ``ShippedFunctionMissing``; the driver then
forgets what that node held and sends the request again in full (``engine.driver``)."""

from __future__ import annotations

import dis
import hashlib
import io
import operator
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import cloudpickle
from msgspec import Struct, field

from skyward.core.codec import load_payload

if TYPE_CHECKING:
    from _pickle import _ReducedType

KEPT_ON_A_NODE = 512
"""Functions a node keeps (the least recently used is dropped first)."""
MAX_ELEMENTS = 64
"""A tuple or frozenset global of more elements is not checked element by element: the
function is then shipped in full each call."""
_ATOMS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), range)
_WRITES = frozenset({dis.opmap["STORE_GLOBAL"], dis.opmap["DELETE_GLOBAL"]})
_ABSENT = object()
"""Stands for a global name the function reads that is not defined (yet): a builtin."""


class ShippedFunctionMissing(LookupError):
    """A request referred to a function this node does not hold (see the module docstring)."""


class _Kept(Struct, frozen=True):
    """A function's pickle and digest, valid while its dependencies are these objects."""

    dependencies: tuple[object, ...]
    digest: bytes
    payload: bytes


class Shipment(Struct):
    """What one request's pickling may leave out: the digests its node holds. Digests
    sent in full are added as they are sent (``reduce``)."""

    functions: ShippedFunctions
    held: set[bytes] = field(default_factory=set)

    def reduce(self, fn: types.FunctionType, dump: Callable[[object], bytes]) -> _ReducedType | None:
        """The reduction of ``fn`` (a function cloudpickle would ship by value): a
        reference when the node holds it, its pickle with its digest otherwise; None
        when it must be pickled afresh as cloudpickle does."""
        kept = self.functions.kept(fn, dump)
        if kept is None:
            return None
        if kept.digest in self.held:
            return (received, (kept.digest,))
        self.held.add(kept.digest)
        return (receive, (kept.digest, kept.payload))

    def digest_held(self, fn: types.FunctionType) -> bytes | None:
        """The digest of ``fn``'s current pickle when its node holds it (a request may
        refer to ``fn`` by it: ``received``); None otherwise (then ``reduce`` it).
        Pickles nothing."""
        dependencies = _dependencies(fn)
        kept = None if dependencies is None else self.functions.current(fn, dependencies)
        if kept is None or kept.digest not in self.held:
            return None
        return kept.digest


class ShippedFunctions:
    """The client's side: the pickles it keeps and the digests each node holds.
    Thread-safe (a call may be encoded on the caller's thread or the loop's)."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[types.FunctionType, _Kept] = weakref.WeakKeyDictionary()
        self._held: dict[int, set[bytes]] = {}
        self._lock = threading.Lock()

    def shipment(self, node: int) -> Shipment:
        """The shipment of a request to ``node``."""
        with self._lock:
            return Shipment(self, self._held.setdefault(node, set()))

    def forget(self, node: int) -> None:
        """``node`` holds nothing any more (its agent was replaced, or it said so)."""
        with self._lock:
            self._held.pop(node, None)

    def kept(self, fn: types.FunctionType, dump: Callable[[object], bytes]) -> _Kept | None:
        """``fn``'s pickle (``dump(fn)``, made now or kept from an earlier call with the
        same dependencies), or None when it cannot be kept."""
        dependencies = _dependencies(fn)
        if dependencies is None:
            return None
        kept = self.current(fn, dependencies)
        if kept is not None:
            return kept
        if any(_writes_globals(dep) for dep in dependencies if isinstance(dep, types.CodeType)):
            return None
        payload = dump(fn)
        kept = _Kept(dependencies, hashlib.blake2b(payload, digest_size=16).digest(), payload)
        with self._lock:
            self._kept[fn] = kept
        return kept


    def current(self, fn: types.FunctionType, dependencies: tuple[object, ...]) -> _Kept | None:
        """``fn``'s kept pickle if it was made with these ``dependencies`` (``_dependencies``)."""
        with self._lock:
            kept = self._kept.get(fn)
        return kept if kept is not None and _same(kept.dependencies, dependencies) else None


def _same(old: tuple[object, ...], new: tuple[object, ...]) -> bool:
    return len(old) == len(new) and all(map(operator.is_, old, new))


def _dependencies(fn: types.FunctionType) -> tuple[object, ...] | None:
    """Every object ``fn``'s pickle is made of that may be rebound (see the module
    docstring), in a fixed order; None when one of them may change in place. ``fn``
    itself is not among them, so a kept pickle does not keep its function alive."""
    found: list[object] = []
    return tuple(found) if _collect(fn, found, set()) else None


def _collect(fn: types.FunctionType, found: list[object], seen: set[int]) -> bool:
    if id(fn) in seen:
        return True
    seen.add(id(fn))
    if fn.__dict__ or fn.__kwdefaults__:
        return False
    defaults, annotations = fn.__defaults__, fn.__annotations__
    found += (fn.__code__, fn.__name__, fn.__qualname__, fn.__module__, fn.__doc__, defaults, annotations)
    values: list[object] = [*defaults] if defaults else []
    if annotations:
        values += annotations.values()
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            return False
    names = cloudpickle.cloudpickle._extract_code_globals(fn.__code__)  # kept per code, in a fixed order
    if names:
        scope = fn.__globals__
        values += [scope.get(name, _ABSENT) for name in names]
    found += values
    for value in values:
        if not _stays(value, found, seen):
            return False
    return True


def _stays(value: object, found: list[object], seen: set[int]) -> bool:
    """Whether ``value`` cannot change without being rebound: an immutable value, or
    what travels by reference (a module, a class or function the nodes import); a
    function that travels by value is looked into in turn."""
    if value is _ABSENT or type(value) in _ATOMS:
        return True
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        members = tuple(value)
        return len(members) <= MAX_ELEMENTS and all(_stays(member, found, seen) for member in members)
    if isinstance(value, (types.GenericAlias, types.UnionType)) or type(value).__module__ == "typing":
        parts = (getattr(value, "__origin__", None), *getattr(value, "__args__", ()))  # list[int], int | None
        return all(_stays(part, found, seen) for part in parts)
    if isinstance(value, (types.ModuleType, type, types.BuiltinFunctionType)):
        return cloudpickle.cloudpickle._should_pickle_by_reference(value)
    if type(value) is types.FunctionType:
        if cloudpickle.cloudpickle._should_pickle_by_reference(value):
            return True
        return _collect(value, found, seen)
    return False


def _writes_globals(code: types.CodeType) -> bool:
    """Whether ``code`` (or code nested in it) assigns or deletes a global."""
    if any(op in _WRITES for op in code.co_code[::2]):
        return True
    return any(_writes_globals(const) for const in code.co_consts if isinstance(const, types.CodeType))


def dump_function(fn: types.FunctionType, pickler: type[cloudpickle.CloudPickler]) -> bytes:
    """``fn`` pickled on its own by ``pickler`` (in band), as ``receive`` loads it."""
    stream = io.BytesIO()
    pickler(stream, protocol=5).dump(fn)
    return stream.getvalue()


_received: OrderedDict[bytes, object] = OrderedDict()
_received_lock = threading.Lock()


def receive(digest: bytes, payload: bytes) -> object:
    """On a node: the function ``payload`` holds, kept under ``digest`` for the next
    requests (bounded by ``KEPT_ON_A_NODE``)."""
    with _received_lock:
        fn = _received.get(digest)
        if fn is not None:
            _received.move_to_end(digest)
            return fn
    fn = load_payload(payload)
    with _received_lock:
        _received[digest] = fn
        while len(_received) > KEPT_ON_A_NODE:
            _received.popitem(last=False)
    return fn


def received(digest: bytes) -> object:
    """On a node: the function kept under ``digest``; ``ShippedFunctionMissing`` when
    this node does not hold it."""
    with _received_lock:
        fn = _received.get(digest)
        if fn is None:
            raise ShippedFunctionMissing(f"this node does not hold the function {digest.hex()}")
        _received.move_to_end(digest)
        return fn
