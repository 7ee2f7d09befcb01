"""What travels between the client and a node agent: a ``TaskRequest`` and its outcome.

Both are cloudpickled (protocol 5) by skyward itself, so Ray carries plain bytes. Buffers
of 1 MiB or more (large numpy arrays, ...) travel out of band: Ray stores them once in
its shared-memory object store and the receiver reads them without copying (read-only,
as with Ray's own arguments). An outcome is ``(True, value)`` or ``(False, TaskFailure)``;
a failure carries the exception pickled (when it can be) and the remote traceback as
text, so the client re-raises the remote exception as its own type. A plain call (plain
arguments, a function the node imports or holds) travels as a bare tuple, which a node
makes a ``TaskRequest`` of (``decode_request``).
"""

from __future__ import annotations

import contextlib
import copyreg
import functools
import io
import os
import pickle
import sys
import sysconfig
import threading
import types
from collections import ChainMap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, SupportsIndex, TypeAlias, TypeGuard, cast

import cloudpickle
import msgspec
from msgspec import Struct, field

from skyward.core.codec import load_payload
from skyward.core.errors import RemoteError, RemoteTraceback, TaskExitError
from skyward.core.frames import users_traceback
from skyward.core.function import SkywardFunction
from skyward.core.instance import MembershipView
from skyward.core.validation import shown
from skyward.engine.shipping import Shipment, dump_function, receive, received

if TYPE_CHECKING:
    from _pickle import _ReducedType  # typeshed's name for what a reduction returns

    from _typeshed import ReadableBuffer  # what has the buffer protocol (bytes, memoryview, ...)

CALL = "call"
MAP = "map"
PROBE = "probe"
"""A health check: runs beside the node's tasks, without a task slot."""
OUT_OF_BAND_BYTES = 1 << 20
DYNAMIC_CODE = "<dynamic-code>"
Payload: TypeAlias = "bytes | tuple[bytes, Sequence[ReadableBuffer]]"
"""A pickle: its bytes, and its out-of-band buffers when it has any (``PickleBuffer``s
as pickled, bytes or views as they arrived)."""
Received: TypeAlias = "Payload | ReadableBuffer"
"""A payload as a node receives it: a ``Payload``, or a pickle's bytes as a view of the
memory they arrived in (a large one shared through Ray's object store, read in place)."""
_by_value_lock = threading.Lock()
_PATHS = sysconfig.get_paths()
_INSTALLED = tuple(
    os.path.realpath(p) for p in {_PATHS["stdlib"], _PATHS["purelib"], _PATHS["platlib"], sys.base_prefix}
)


def _code_keeping_filename(code: types.CodeType) -> tuple[Callable[..., types.CodeType], tuple[object, ...]]:
    """cloudpickle's reduction of ``code``, with its real file name where cloudpickle put
    ``"<dynamic-code>"`` (3.1.3 and later do)."""
    rebuild, args = cloudpickle.cloudpickle._code_reduce(code)
    return rebuild, tuple(code.co_filename if arg == DYNAMIC_CODE else arg for arg in args)


_Reducer: TypeAlias = "Callable[[Any], object]"
"""How a pickler's ``dispatch_table`` reduces an object of the type it is filed under."""
_OWN_REDUCERS: dict[type, _Reducer] = {types.CodeType: _code_keeping_filename}
_CLOUDPICKLE_REDUCERS = tuple(
    table for table in cloudpickle.CloudPickler.dispatch_table.maps if table is not copyreg.dispatch_table
)
"""cloudpickle's own reducers by type (its dispatch table without copyreg's)."""


class _FlatReducers:
    """Our reducers, cloudpickle's, then copyreg's, in that order, as one dict made again
    whenever copyreg's table has changed (a reducer registered or replaced). The C pickler
    looks up every object it reduces in its ``dispatch_table``: a dict answers a miss in
    C, cloudpickle's ``ChainMap`` with a Python call and a KeyError per map (a few µs per
    request). Only copyreg's table is watched: cloudpickle's own is fixed at import."""

    def __init__(self) -> None:
        self._made: tuple[dict[type, _Reducer], dict[type, _Reducer]] | None = None  # copyreg's as copied, flat

    def current(self) -> dict[type, _Reducer]:
        made = self._made  # one read: a rebuild in another thread replaces the pair, never half of it
        if made is None or made[0] != copyreg.dispatch_table:  # compared in C
            copied: dict[type, _Reducer] = dict(copyreg.dispatch_table)
            flat: dict[type, _Reducer] = {}
            for table in (copied, *reversed(_CLOUDPICKLE_REDUCERS), _OWN_REDUCERS):  # the last written wins
                flat.update(table)
            made = copied, flat
            self._made = made
        return made[1]


_flat_reducers = _FlatReducers()


class _Pickler(cloudpickle.CloudPickler):
    """cloudpickle's pickler, except that code shipped by value keeps its file name, so a
    remote traceback names the user's file and the client fills in its source lines, and
    that with a ``shipment`` a function shipped by value goes to a node once
    (``engine.shipping``)."""

    shipment: Shipment | None = None

    def __init__(
        self, file: io.BytesIO, protocol: int, buffer_callback: Callable[[pickle.PickleBuffer], bool] | None = None
    ) -> None:
        # read once, by the C pickler's __init__; typed as cloudpickle's ChainMap, any mapping will do
        self.dispatch_table = _flat_reducers.current()  # type: ignore[assignment]
        super().__init__(file, protocol=protocol, buffer_callback=buffer_callback)

    def reducer_override(self, obj: object) -> _ReducedType:
        if id(obj) in _WIRE_GLOBALS:  # skyward's own, importable on every node: by reference
            return NotImplemented  # type: ignore[no-any-return]  # typeshed's NotImplemented is Any
        if (
            self.shipment is not None
            and type(obj) is types.FunctionType
            and not cloudpickle.cloudpickle._should_pickle_by_reference(obj)
        ):
            reduced = self.shipment.reduce(obj, functools.partial(dump_function, pickler=type(self)))
            if reduced is not None:
                return reduced
        return super().reducer_override(obj)


def encode(obj: object, shipment: Shipment | None = None) -> Payload:
    """Pickle ``obj``; big buffers stay out of band (see the module docstring), a
    request's large ``bytes`` arguments among them. With a ``shipment``, functions its
    node holds travel as a reference."""
    plain = _plain_pickle(obj, shipment)
    if plain is not None:
        return plain
    if type(obj) is TaskRequest:
        obj = _large_bytes_apart(obj)
    return _dump(obj, _Pickler, shipment)


_PLAIN = frozenset({type(None), bool, int, float, str})


def _plain(value: object) -> bool:
    """Whether the C pickler alone pickles ``value`` as cloudpickle would, in band."""
    return type(value) in _PLAIN or (type(value) is bytes and len(value) < OUT_OF_BAND_BYTES)


def _plain_pickle(obj: object, shipment: Shipment | None) -> bytes | None:
    """``obj`` pickled by the C pickler alone, when cloudpickle would add nothing: a tuple
    of plain values (an outcome such as ``(True, None, 0)``), or a plain call: a call
    with plain arguments of a function that travels by name or that its node holds
    (``shipment``), pickled as the tuple ``decode_request`` makes whole again. None
    otherwise. This skips cloudpickle's per-object hook, about 15 µs of a trivial call's
    encoding, and the node's rebuilding of the request's classes."""
    if type(obj) is tuple:
        return pickle.dumps(obj, protocol=5) if all(map(_plain, obj)) else None
    if type(obj) is not TaskRequest or shipment is None or obj.kind != CALL or obj.view is not None:
        return None
    if not all(map(_plain, obj.args)) or not all(map(_plain, obj.kwargs.values())):
        return None
    if obj.kwargs and not all(type(name) is str for name in obj.kwargs):  # a str subclass would go by reference
        return None
    fn = _function_on_wire(obj.fn, shipment)
    if fn is None:
        return None
    return pickle.dumps((obj.task_id, obj.name, fn, obj.args, obj.kwargs, obj.timeout), protocol=5)


def _function_on_wire(fn: object, shipment: Shipment) -> object | None:
    """What stands for ``fn`` in a plain call: ``fn`` itself when it travels by name (an
    ``@sky.function`` of an importable module, unless registered by value), else the
    function it wraps, by name or as the digest of what the node holds (``bytes``); None
    when that takes cloudpickle (the node lacks it, it is not a plain function)."""
    if type(fn) is SkywardFunction:
        if isinstance(fn.__reduce__(), str) and not _by_value(fn.__module__):
            return fn
        fn = fn.local
    if type(fn) is not types.FunctionType:
        return None
    if cloudpickle.cloudpickle._should_pickle_by_reference(fn):
        return fn
    return shipment.digest_held(fn)


def _dump(obj: object, pickler: type[_Pickler], shipment: Shipment | None = None) -> Payload:
    buffers: list[ReadableBuffer] = []

    def keep_in_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < OUT_OF_BAND_BYTES:
            return True
        buffers.append(buffer)
        return False

    stream = io.BytesIO()
    dumping = pickler(stream, protocol=5, buffer_callback=keep_in_band)
    dumping.shipment = shipment
    dumping.dump(obj)
    header = stream.getvalue()
    return (header, buffers) if buffers else header


class ByValueEncoder:
    """``encode`` for nodes that do not have the client's own modules (scripts, tests,
    anything not installed in site-packages or shipped with ``Image.includes``): those
    are pickled by value, so cloudpickle ships their code with the request."""

    def __init__(self, shipped_roots: tuple[str, ...] = ()) -> None:
        self._shipped = tuple(os.path.realpath(p) for p in shipped_roots)
        self._decided: dict[str, bool] = {}
        self._seen: tuple[int, str] | None = None
        self._local: set[str] = set()

    def __call__(self, obj: object, shipment: Shipment | None = None) -> Payload:
        """``obj`` pickled; a request's large ``bytes`` arguments out of band, as ``encode``
        does (a remote pool sends such a payload to its head relay over the upload lane,
        and the relay stores the buffer in Ray's object store, where each node reads it
        in place)."""
        with self._by_value():
            plain = _plain_pickle(obj, shipment)
            if plain is not None:
                return plain
            if type(obj) is TaskRequest:
                obj = _large_bytes_apart(obj)
            return _dump(obj, _ByValuePickler, shipment)

    def dumps(self, obj: object) -> bytes:
        """``obj`` as one bytes object (no out-of-band buffers), modules by value alike."""
        with self._by_value():
            stream = io.BytesIO()
            _ByValuePickler(stream, protocol=5).dump(obj)
            return stream.getvalue()

    @contextlib.contextmanager
    def _by_value(self) -> Iterator[None]:
        """Register the client's own modules by value for the duration (each under its
        own name, once, however many names ``sys.modules`` knows it by)."""
        registered = cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES
        with _by_value_lock:
            added = [name for name in self._local_modules() if name not in registered]
            registered.update(added)
            try:
                yield
            finally:
                registered.difference_update(added)

    def _local_modules(self) -> set[str]:
        """The ``__name__`` of every module of the client's own code loaded now: looked
        for again only when ``sys.modules`` changed (its size or its newest entry), as
        walking it costs ~50 µs a call."""
        seen = (len(sys.modules), next(reversed(sys.modules), ""))
        if seen == self._seen:
            return self._local
        local = set()
        for key, module in list(sys.modules.items()):
            decided = self._decided.get(key)
            if decided is None:
                decided = self._decided[key] = self._is_local(module)
            if decided:
                local.add(getattr(module, "__name__", key))
        self._seen, self._local = seen, local
        return local

    def _is_local(self, module: object) -> bool:
        path = getattr(module, "__file__", None)
        name = getattr(module, "__name__", "")
        if not path or not isinstance(path, str) or name == "__main__" or name.split(".")[0] == "skyward":
            return False
        real = os.path.realpath(path)
        installed = (
            real.startswith(_INSTALLED)
            or real.startswith(os.path.realpath(sys.prefix))
            or any(part in ("site-packages", "dist-packages") for part in Path(real).parts)
        )
        return not installed and not real.startswith(self._shipped)


class _ByValuePickler(_Pickler):
    """Also ships ``@sky.function`` objects of by-value modules by value (they would
    otherwise travel as a reference to their module)."""

    def reducer_override(self, obj: object) -> _ReducedType:
        if isinstance(obj, SkywardFunction) and _by_value(obj.__module__):
            return (SkywardFunction, (obj.local, obj.timeout))
        return super().reducer_override(obj)


def _by_value(module: str | None) -> bool:
    """Whether ``module`` (a ``__module__``: None for code defined without a ``__name__``
    in its globals, which cloudpickle ships by value anyway) is registered by value."""
    if module is None:
        return False
    registered = cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES
    parts = module.split(".")
    return any(".".join(parts[:i]) in registered for i in range(1, len(parts) + 1))


def decode(payload: Received) -> Any:
    """The object ``encode`` packed: whatever it was (a request, an outcome, a user's
    value), so the caller unpacks it into the types it knows were sent."""
    if isinstance(payload, bytes):
        return load_payload(payload)
    if not isinstance(payload, tuple):
        return load_payload(memoryview(payload))
    header, buffers = payload
    return load_payload(header, buffers=buffers)


def decode_request(payload: Received) -> TaskRequest:
    """The ``TaskRequest`` that ``encode`` packed, a plain call (``_plain_pickle``) made
    whole again: its function looked up among those this node holds when it travelled as
    their digest. ``ShippedFunctionMissing`` when this node does not hold it; whatever
    unpickling raises otherwise (a module this node lacks)."""
    request = decode(payload)
    if type(request) is not tuple:
        return cast("TaskRequest", request)
    task_id, name, fn, args, kwargs, timeout = request
    function = cast("Callable[..., object]", received(fn) if type(fn) is bytes else fn)
    return TaskRequest(task_id, name, function, args, kwargs, timeout)


class TaskRequest(Struct, frozen=True):
    """One unit of work: ``fn(*args, **kwargs)``, or for ``MAP`` ``[fn(x) for x in args[0]]``.

    ``timeout`` is per call (per item for ``MAP``), counted from when it starts running.
    ``view`` is the pool's membership when it changed since the node last heard of it
    (None otherwise): the node applies it to its ``InstanceInfo`` before running.
    """

    task_id: str
    name: str
    fn: Callable[..., object]
    args: tuple[object, ...] = ()
    kwargs: dict[str, object] = field(default_factory=dict)
    timeout: float | None = None
    kind: str = CALL
    view: MembershipView | None = None

    @property
    def chunk(self) -> list[object]:
        """A ``MAP`` request's items: its one argument, the list the driver cut."""
        items = self.args[0]
        if not isinstance(items, list):
            raise TypeError(f"a map request carries a list of items, got {type(items).__name__}")
        return items


class _LargeBytes:
    """A ``bytes`` argument of ``OUT_OF_BAND_BYTES`` or more, as the pickler sees it: it
    pickles as ``bytes`` made from an out-of-band buffer of it, so the client does not
    copy it into the pickle (the C pickler writes ``bytes`` in band and asks no reducer);
    the node makes it in memory backed by huge pages (``huge_pages.bytes_of``)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Callable[[ReadableBuffer], bytes], tuple[object]]:
        from skyward.core.huge_pages import bytes_of  # ctypes: only where a large argument goes

        return bytes_of, (pickle.PickleBuffer(self.data),)


def _large(value: object) -> TypeGuard[bytes]:
    return type(value) is bytes and len(value) >= OUT_OF_BAND_BYTES


def _large_bytes_apart(request: TaskRequest) -> TaskRequest:
    """``request`` with each large ``bytes`` among its arguments (not nested deeper) as a
    ``_LargeBytes``, one per object (so an object passed twice travels once); ``request``
    itself when it has none."""
    if not any(map(_large, request.args)) and not any(map(_large, request.kwargs.values())):
        return request
    wrapped: dict[int, _LargeBytes] = {}

    def apart(value: object) -> object:
        if not _large(value):
            return value
        if id(value) not in wrapped:
            wrapped[id(value)] = _LargeBytes(value)
        return wrapped[id(value)]

    return msgspec.structs.replace(
        request, args=tuple(map(apart, request.args)), kwargs={k: apart(v) for k, v in request.kwargs.items()}
    )


class TaskFailure(Struct, frozen=True):
    """Why a task failed, in a form that always pickles."""

    type_name: str
    message: str
    traceback: str
    node: int
    exception: bytes | None = None
    item: int | None = None
    timed_out: bool = False
    crashed: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException, node: int, item: int | None = None) -> TaskFailure:
        """Capture ``exc`` (with its traceback) raised while running a task on ``node``."""
        text = users_traceback(exc)
        return cls(type(exc).__qualname__, str(exc), text, node, _pickle_exception(exc), item)

    def to_exception(self, task_name: str) -> BaseException:
        """The exception to raise on the client, with the remote traceback as its cause."""
        exc = _unpickle_exception(self.exception, self.type_name, self.message)
        if not isinstance(exc, Exception):  # SystemExit & co. must not end the client
            exc = TaskExitError(type(exc).__name__, self.message, getattr(exc, "code", None))
        where = f"on node {self.node}" + (f" (item {self.item})" if self.item is not None else "")
        exc.__cause__ = RemoteTraceback(self.traceback)
        exc.add_note(f"raised {where} while running {task_name}")
        return exc


Outcome = tuple[bool, object]
"""``(True, value)`` or ``(False, TaskFailure)``."""


def _unpickle_exception(payload: bytes | None, type_name: str, message: str) -> BaseException:
    """The exception ``_pickle_exception`` captured, or a ``RemoteError`` naming its type
    and message when it cannot be loaded here."""
    if payload is not None:
        try:
            loaded = load_payload(payload)
            return loaded.rebuild() if isinstance(loaded, _ExceptionState) else loaded
        except Exception:
            pass
    return RemoteError(type_name, message)


def _pickle_exception(exc: BaseException) -> bytes | None:
    """Pickle ``exc`` so it loads back as its own type, or None if it cannot be.

    Exceptions whose ``__init__`` takes other arguments than ``args`` do not survive a
    plain pickle round trip; those are rebuilt from class, args and ``__dict__``.
    """
    for candidate in (exc, _ExceptionState(type(exc), exc.args, dict(vars(exc)))):
        try:
            payload = cloudpickle.dumps(candidate)
            load_payload(payload)
            return payload
        except Exception:
            continue
    return None


class _ExceptionState(Struct, frozen=True):
    cls: type[BaseException]
    args: tuple[object, ...]
    state: dict[str, object]

    def rebuild(self) -> BaseException:
        exc = self.cls.__new__(self.cls)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


def describe_unpicklable(
    fn: object, args: tuple[object, ...], kwargs: dict[str, object], name: str
) -> TypeError | None:
    """Find which part of a call cannot be pickled and say so; None if all of it can."""
    parts: list[tuple[str, object]] = [("the function", fn)]
    parts += [(f"argument {i}", value) for i, value in enumerate(args)]
    parts += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
    for label, value in parts:
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            if _too_deep(exc):
                return TypeError(
                    f"Cannot send {name} to the pool: {label} ({shown(value)}) is nested too deeply to pickle "
                    f"(more than about {sys.getrecursionlimit()} levels). Flatten it, or build it inside the function."
                )
            return TypeError(
                f"Cannot send {name} to the pool: {label} ({shown(value)}) cannot be pickled: {exc}. "
                "Pass something picklable, or create the object inside the function."
            )
    return None


def _too_deep(exc: Exception) -> bool:
    """Whether pickling failed for nesting too deep (cloudpickle rewords RecursionError)."""
    return isinstance(exc, RecursionError) or isinstance(exc.__context__, RecursionError) or "recursion" in str(exc)


_WIRE_GLOBALS = frozenset(map(id, (TaskRequest, TaskFailure, MembershipView, SkywardFunction, receive, received)))
"""What every request or outcome may refer to, pickled by reference without asking
cloudpickle (its check walks the module path: ~5 µs each, two or three a request)."""
