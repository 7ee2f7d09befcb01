"""``sky.dict(name)``: a key-value store shared by every node of the pool."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, NoReturn, TypeVar, cast

from skyward.collections.markers import MISSING
from skyward.collections.named import NamedCollection
from skyward.collections.remote import Items
from skyward.collections.steps import Steps, async_twin, run, steps
from skyward.core.validation import shown

NO_ENUMERATION = (
    "sky.dict({name!r}) does not support {what}: its keys are spread over several actors "
    "(entity-per-key), so no single place knows them all. Keep the keys you need in a "
    "sky.set(), or count entries with a sky.counter()."
)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SharedDict(NamedCollection, Generic[K, V]):
    """A distributed dict: ``d[k]``, ``d[k] = v``, ``del d[k]``, ``k in d``, ``get``,
    ``set``, ``delete``, ``contains``, ``update``, ``pop``, each with an ``_async`` twin.

    Stores None like any value: ``d[k]`` raises KeyError only for a missing key. Keys are
    spread over the pool's shards by a stable hash, so different keys do not
    contend; ``update`` and ``pop`` are atomic. ``keys()``, ``values()``, ``items()``,
    ``len()`` and iteration raise TypeError (see ``NO_ENUMERATION``).

    Generic in its key and value types: ``d: SharedDict[str, int] = sky.dict("d")``
    (``sky.dict`` itself leaves both open). Like any container filled by
    other processes, the value type is the caller's word, not checked at runtime: reads
    ``cast`` what the owner stored to ``V``.
    """

    KIND = "dict"
    __slots__ = ()

    @steps
    def get(self, key: K, default: V | None = None) -> Steps[V | None]:
        """The value of ``key``, or ``default`` when the key is missing."""
        value = yield from self._operations.dict_get(self.name, key, self._strong, self._fresh())
        return default if value is MISSING else cast(V, value)

    @steps
    def set(self, key: K, value: V, fence: int | None = None) -> Steps[None]:
        """``d[key] = value``. With ``fence``, a lock's fencing token
        (``sky.lock(name).token``; strong dicts only), the key's owner refuses the write
        with StaleFenceError, writing nothing, when the key was written with a newer
        token: its writer lost the lock to its lease and a later holder wrote since.
        TypeError for a fence that is not a positive int; ValueError on an eventual dict."""
        if fence is None:
            yield from self._operations.dict_set(self.name, key, value, self._strong)
            return
        if isinstance(fence, bool) or not isinstance(fence, int) or fence < 1:
            raise TypeError(
                f"sky.dict({self.name!r}).set(fence={shown(fence)}): a fence is a lock's fencing token, a positive "
                "int; pass sky.lock(name).token while holding that lock"
            )
        if not self._strong:
            raise ValueError(
                f"sky.dict({self.name!r}).set(fence={fence}): fenced writes are checked at the key's owner, which "
                f"an eventual dict does not ask; use sky.dict({self.name!r}, consistency='strong')"
            )
        yield from self._operations.dict_set(self.name, key, value, True, fence)

    @steps
    def delete(self, key: K) -> Steps[None]:
        """``del d[key]``; KeyError if the key is missing."""
        if not (yield from self._operations.dict_delete(self.name, key, self._strong, self._fresh())):
            raise KeyError(key)

    @steps
    def contains(self, key: K) -> Steps[bool]:
        """``key in d``."""
        return (yield from self._operations.dict_contains(self.name, key, self._strong, self._fresh()))

    @steps
    def update(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = (), **kwargs: V) -> Steps[None]:
        """Write several keys as one atomic step (a mapping or pairs, plus keywords);
        TypeError if ``items`` is neither a mapping nor an iterable of pairs."""
        if not isinstance(items, Iterable):
            raise TypeError(
                f"sky.dict({self.name!r}).update({shown(items)}): expects a mapping or an iterable of "
                f"(key, value) pairs, got {type(items).__name__}; pass e.g. {{'k': 1}} or [('k', 1)]"
            )
        pairs: Items = [*(items.items() if isinstance(items, Mapping) else items), *kwargs.items()]
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(f"sky.dict({self.name!r}).update() takes a mapping or (key, value) pairs, got {pair!r}")
        if pairs:
            yield from self._operations.dict_update(self.name, pairs, self._strong)

    @steps
    def pop(self, key: K, default: V | None = None) -> Steps[V | None]:
        """Remove ``key`` and return its value (``default`` if missing), atomically."""
        value = yield from self._operations.dict_pop(self.name, key, self._strong)
        return default if value is MISSING else cast(V, value)

    get_async = async_twin(get)
    set_async = async_twin(set)
    delete_async = async_twin(delete)
    contains_async = async_twin(contains)
    update_async = async_twin(update)
    pop_async = async_twin(pop)

    def __getitem__(self, key: K) -> V:
        value = run(self._operations.dict_get(self.name, key, self._strong, self._fresh()))
        if value is MISSING:
            raise KeyError(key)
        return cast(V, value)

    def __setitem__(self, key: K, value: V) -> None:
        run(self._operations.dict_set(self.name, key, value, self._strong))

    def __delitem__(self, key: K) -> None:
        self.delete(key)

    def __contains__(self, key: K) -> bool:
        return bool(run(self._operations.dict_contains(self.name, key, self._strong, self._fresh())))

    def keys(self) -> NoReturn:
        raise TypeError(NO_ENUMERATION.format(name=self.name, what="keys()"))

    def values(self) -> NoReturn:
        raise TypeError(NO_ENUMERATION.format(name=self.name, what="values()"))

    def items(self) -> NoReturn:
        raise TypeError(NO_ENUMERATION.format(name=self.name, what="items()"))

    def __len__(self) -> NoReturn:
        raise TypeError(NO_ENUMERATION.format(name=self.name, what="len()"))

    def __iter__(self) -> NoReturn:
        raise TypeError(NO_ENUMERATION.format(name=self.name, what="iteration"))
