"""Messages between the client and a head agent over one TCP stream (the SSH tunnel).

Each message is a cloudpickled tuple, framed by an 8-byte length. Client -> head:
``("run", id, pending, target, wants)``, ``("broadcast", id, pending, wants)``,
``("map", id, pending, items, wants)``, ``("collection", id, op, args, wants)`` (a
collection engine operation, see ``remote_collections``), ``("cancel", id)``. Head -> client:
``("result", id, ok, value_or_exception)`` and ``("events", [event, ...])``.

The client's own modules (scripts, tests, anything not installed in site-packages or
shipped with ``Image.includes``) do not exist on the nodes, so they are pickled by
value: cloudpickle ships the code itself.
"""

from __future__ import annotations

import asyncio
import io
import os
import struct
import sys
import sysconfig
import threading
from typing import Any

import cloudpickle

from skyward.function import SkywardFunction

HEADER = struct.Struct("!Q")
_by_value_lock = threading.Lock()
_PATHS = sysconfig.get_paths()
_INSTALLED = tuple(
    os.path.realpath(p) for p in {_PATHS["stdlib"], _PATHS["purelib"], _PATHS["platlib"], sys.base_prefix}
)


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(HEADER.pack(len(data)))
    writer.write(data)
    await writer.drain()


async def receive(reader: asyncio.StreamReader) -> Any:
    """The next message, or None at end of stream."""
    try:
        header = await reader.readexactly(HEADER.size)
        (size,) = HEADER.unpack(header)
        return cloudpickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        return None


def dumps(message: Any) -> bytes:
    return cloudpickle.dumps(message, protocol=5)


class _ByValuePickler(cloudpickle.CloudPickler):
    """Also ships ``@sky.function`` objects of by-value modules by value (they would
    otherwise travel as a reference to their module)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, SkywardFunction) and _by_value(obj.__module__):
            return (SkywardFunction, (obj.local, obj.timeout))
        return super().reducer_override(obj)


def _by_value(module: str) -> bool:
    registered = cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES
    parts = module.split(".")
    return any(".".join(parts[:i]) in registered for i in range(1, len(parts) + 1))


class ClientPickler:
    """Pickles messages on the client, shipping the client's own modules by value."""

    def __init__(self, shipped_roots: tuple[str, ...] = ()) -> None:
        self._shipped = tuple(os.path.realpath(p) for p in shipped_roots)
        self._decided: dict[str, bool] = {}

    def dumps(self, message: Any) -> bytes:
        modules = self._local_modules()
        with _by_value_lock:
            registered = []
            for name in modules:
                if name not in cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES:
                    cloudpickle.register_pickle_by_value(sys.modules[name])
                    registered.append(name)
            try:
                buffer = io.BytesIO()
                _ByValuePickler(buffer, protocol=5).dump(message)
                return buffer.getvalue()
            finally:
                for name in registered:
                    cloudpickle.unregister_pickle_by_value(sys.modules[name])

    def _local_modules(self) -> list[str]:
        local = []
        for name, module in list(sys.modules.items()):
            decided = self._decided.get(name)
            if decided is None:
                decided = self._decided[name] = self._is_local(module)
            if decided and name in sys.modules:
                local.append(name)
        return local

    def _is_local(self, module: Any) -> bool:
        path = getattr(module, "__file__", None)
        name = getattr(module, "__name__", "")
        if not path or not isinstance(path, str) or name == "__main__" or name.split(".")[0] == "skyward":
            return False
        real = os.path.realpath(path)
        installed = real.startswith(_INSTALLED) or real.startswith(os.path.realpath(sys.prefix))
        return not installed and not real.startswith(self._shipped)
