"""``sky.Session``: several pools with one lifetime.

``with sky.Session() as session:`` then ``session.compute(...)`` (same arguments as
``sky.Compute``) opens a pool that lives until the session ends; pools are closed in
parallel on exit. ``session.close()`` does the same without ``with``.
"""

from __future__ import annotations

import concurrent.futures
import threading
from types import TracebackType

from skyward.api.compute import Compute
from skyward.api.pool import Pool
from skyward.model.spec import OPTION_FIELDS, SPEC_FIELDS, Options, Spec


class Session:
    """Owns pools opened through it and closes them together. Options for its pools come
    as ``options=sky.Options(...)`` or as Options fields (``Session(console="log")``),
    which override the same fields of ``options``."""

    def __init__(self, options: Options | None = None, **option_fields: object) -> None:
        if options is not None and not isinstance(options, Options):
            raise TypeError(f"Session(options=...) takes sky.Options(...), got {type(options).__name__}")
        unknown = sorted(set(option_fields) - set(Options.__dataclass_fields__))
        if unknown:
            raise TypeError(
                f"Session() got unknown option(s) {', '.join(unknown)}; it takes sky.Options fields such as console="
            )
        if option_fields:
            options = (options or Options()).with_(**option_fields)
        self.options = options
        self.pools: list[Pool] = []
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(cancel=exc_type is not None)

    def compute(
        self, *specs: Spec, name: str | None = None, options: Options | None = None, **fields: object
    ) -> Pool:
        """Open a pool (arguments as for ``sky.Compute``) owned by this session; Options
        fields given as keywords change the session's options for this pool."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this session is closed; start a new one")
        given = {key: fields.pop(key) for key in list(fields) if key in OPTION_FIELDS and key not in SPEC_FIELDS}
        chosen = options or self.options
        if given:
            chosen = (chosen or Options()).with_(**given)
        pool = Compute(*specs, name=name, options=chosen, **fields)
        pool.open()
        with self._lock:
            self.pools.append(pool)
        return pool

    def close(self, cancel: bool = False) -> None:
        """Close every pool of the session, in parallel."""
        with self._lock:
            self._closed = True
            pools, self.pools = self.pools, []
        if not pools:
            return
        with concurrent.futures.ThreadPoolExecutor(len(pools)) as executor:
            list(executor.map(lambda p: p.close(cancel=cancel), pools))
