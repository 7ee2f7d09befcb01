"""Opening pools: ``sky.Compute`` (three calling conventions), the older ``ComputePool``
and ``@sky.pool`` names, and ``MultiPool`` for several pools provisioned in parallel."""

from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from skyward.api.pool import Pool
from skyward.api.selection import ProviderLike, ProviderSelector, SelectionLike
from skyward.core import accelerators
from skyward.core.accelerators import Accelerator
from skyward.core.frames import shows_users_frames
from skyward.core.validation import reject_unknown
from skyward.engine import interruptible
from skyward.image.image import Image
from skyward.model.spec import DEFAULT_TTL, OPTION_FIELDS, SPEC_FIELDS, Nodes, Options, Spec, Worker
from skyward.observe.events import Event
from skyward.providers.local.provider import Local

if TYPE_CHECKING:
    from skyward.storage.volume import Volume

P = ParamSpec("P")
R = TypeVar("R")

ADOPT_ENV = "SKYWARD_POOL"
"""Set (by ``sky run NAME``): every ``Compute(...)`` of the script adopts the kept pool NAME."""


@shows_users_frames
def Compute(*specs: Spec, name: str | None = None, options: Options | None = None, **spec_fields: object) -> Pool:  # noqa: N802
    """A pool to open with ``with``. Pass Spec fields as keywords (provider defaults to
    ``sky.Local()``), or one or more ``Spec`` objects (tried in ``Options.selection``
    order), or only ``name=``: the kept pool NAME as it was defined (docs/kept-pools.md),
    else the ``[pools.NAME]`` table of skyward.toml. Specs and fields do not mix. With
    specs or fields, ``name`` names the pool (events, the console; generated when
    absent). Under ``sky run NAME`` (``$SKYWARD_POOL``) the pool is the kept pool NAME,
    whatever the call's own Specs (LookupError when it is not kept).
    """
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"options= takes sky.Options(...), got {type(options).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"Compute(name=...) takes a string, got {type(name).__name__} {name!r}")
    options = _with_option_fields(options, spec_fields)
    adopting = os.environ.get(ADOPT_ENV, "").strip()
    if adopting:  # ``sky run NAME``: the script's pools are the kept pool NAME
        name, specs, spec_fields = adopting, (), {}
    if name is not None and not specs and not spec_fields:  # a named pool: kept, or from the config file
        from skyward.api.config_file import load_named_pool
        from skyward.providers.daemon_client import kept_definition

        kept = kept_definition(name)
        if kept is not None:
            spec, kept_options = kept
            chosen = options.with_(keep_alive=kept_options.keep_alive) if options else kept_options
            return Pool((spec,), chosen, name, kept=True)
        if adopting:
            raise LookupError(f"no pool named {name!r} is kept now (${ADOPT_ENV}); sky ls lists the kept pools")
        spec, file_options = load_named_pool(name)
        return Pool((spec,), options or file_options, name)
    if specs and spec_fields:
        raise TypeError(
            "Compute() takes either Spec objects or Spec fields as keywords, not both: "
            f"move {', '.join(sorted(spec_fields))} into the Spec objects"
        )
    for spec in specs:
        if not isinstance(spec, Spec):
            raise TypeError(f"Compute() positional arguments must be sky.Spec(...), got {type(spec).__name__} {spec!r}")
    if not specs:
        specs = (_spec_from_fields(spec_fields),)
    return Pool(tuple(specs), options or Options(), name)


def _with_option_fields(options: Options | None, fields: dict[str, object]) -> Options | None:
    """``options`` with the Options fields among ``fields`` (removed from it) applied, as
    the original's guides write them (``sky.Compute(..., worker=sky.Worker(...))``);
    TypeError for a field given both ways."""
    given = {key: fields.pop(key) for key in list(fields) if key in OPTION_FIELDS and key not in SPEC_FIELDS}
    if not given:
        return options
    if options is not None:
        raise TypeError(
            f"Compute() got {', '.join(f'{key}=' for key in sorted(given))} beside options=: "
            "put them in the sky.Options(...) given, or drop options="
        )
    return Options().with_(**given)


def _spec_from_fields(spec_fields: dict[str, Any]) -> Spec:
    """A Spec of the keywords given to ``Compute`` (each value checked by ``Spec`` itself)."""
    reject_unknown("Compute", spec_fields, (*SPEC_FIELDS, "name", "options", *OPTION_FIELDS))
    spec_fields.setdefault("provider", Local())
    return Spec(**spec_fields)


_DISPLAY = {"log": "log", "spinner": "rich", "quiet": "silent"}


@shows_users_frames
def ComputePool(  # noqa: N802
    provider: ProviderLike | None = None,
    selection: SelectionLike = "first",
    image: Image | None = None,
    nodes: int | tuple[int, int] | Nodes = 1,
    machine: str | None = None,
    accelerator: Accelerator | str | None = None,
    cpu: float | None = None,
    memory: str | None = None,
    volume: Volume | Sequence[Volume] | None = None,
    allocation: str | float = "spot-if-available",
    timeout: int | None = None,
    env: dict[str, str] | None = None,
    concurrency: int = 1,
    display: str = "log",
    on_event: Callable[[Event], object] | None = None,
    collect_metrics: bool = True,
) -> Pool:
    """The older constructor: its parameters mapped onto ``Spec`` and ``Options``.

    ``machine`` pins the provider's instance type ("p5.48xlarge": ``Spec.instance_type``,
    honoured by AWS, refused by the others). ``provider`` may be a list (tried in ``selection`` order: "first", "cheapest",
    "available", or a callable ``(providers, spec) -> provider``); ``timeout`` is the
    auto-shutdown ``Spec.ttl`` (unset: the Spec default); ``allocation`` takes the
    strategy names, a spot share (0.8) or ``sky.Allocation.*``; ``display``
    "log"/"spinner"/"quiet" maps to the console modes "log"/"rich"/"silent"; ``on_event``
    receives every event.
    """
    if display not in _DISPLAY:
        raise ValueError(f"ComputePool(display={display!r}) is not valid: use \"log\", \"spinner\" or \"quiet\"")
    if not callable(selection) and selection not in ("first", "cheapest", "available"):
        raise ValueError(f"ComputePool(selection={selection!r}) is not valid: use \"first\", \"cheapest\" or \"available\"")
    base = image or Image()
    if env:
        base = replace(base, env={**base.env, **env})
    if not collect_metrics:
        base = replace(base, metrics=None)
    providers = provider if isinstance(provider, (list, tuple)) else [provider or Local()]
    chosen_accelerator, memory_gb = _old_accelerator(accelerator), _gigabytes(memory)
    volumes: tuple[Volume, ...] = ()
    if volume is not None:  # storage loads for a pool with volumes
        from skyward.storage.volume import Volume

        volumes = (volume,) if isinstance(volume, Volume) else tuple(volume)
    specs = tuple(
        Spec(
            provider=p, accelerator=chosen_accelerator, nodes=nodes, vcpus=cpu,
            memory_gb=memory_gb, allocation=allocation, image=base,
            ttl=DEFAULT_TTL if timeout is None else timeout, volumes=volumes, instance_type=machine,
        )
        for p in providers
    )
    options = Options(
        selection=_old_selector(selection) if callable(selection) else selection,
        worker=Worker(concurrency=concurrency),
        console=_DISPLAY[display],
    )
    pool = Pool(specs, options)
    if on_event is not None:
        pool._bus.on(Event, on_event, legacy=True)  # the older constructor's callbacks get the older events too
    return pool


def _old_selector(choose: ProviderSelector) -> Callable[[tuple[Spec, ...]], Spec]:
    """The older ``(providers, spec) -> provider`` selector as ``Options.selection``."""

    def select(specs: tuple[Spec, ...]) -> Spec:
        chosen = choose(tuple(spec.provider for spec in specs), specs[0])
        return next((spec for spec in specs if spec.provider is chosen), specs[0])

    return select


def _old_accelerator(value: Accelerator | str | None) -> Accelerator | None:
    if value is None or isinstance(value, accelerators.Accelerator):
        return value
    if isinstance(value, str):
        return accelerators.parse_accelerator(value)
    raise ValueError(f"ComputePool(accelerator={value!r}) is not valid: use sky.accelerators.A100() or a name like \"A100\"")


def _gigabytes(memory: str | None) -> float | None:
    if memory is None:
        return None
    text = str(memory).strip().upper()
    try:
        return float(text.removesuffix("GB").removesuffix("G"))
    except ValueError:
        raise ValueError(f"ComputePool(memory={memory!r}) is not valid: use a size like \"32GB\"") from None


def pool(*specs: Spec, **params: Any) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: open a pool for the duration of each call of the function, so the body
    can dispatch with ``>> sky``. Takes what ``Compute`` takes; the older ``ComputePool``
    parameters (``display=``, ``concurrency=``, ...) are accepted too."""

    def make() -> Pool:
        if specs or "options" in params or "name" in params or set(params) <= set(SPEC_FIELDS):
            return Compute(*specs, **params)
        return ComputePool(**params)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with make():
                return fn(*args, **kwargs)

        return wrapper

    return decorate


class MultiPool:
    """Open several pools in parallel; ``with MultiPool(a, b) as (pa, pb):``. If one fails
    to open, the others are closed and the error is raised. Exit closes all in parallel."""

    def __init__(self, *pools: Pool) -> None:
        for item in pools:
            if not isinstance(item, Pool):
                raise TypeError(f"MultiPool takes pools (sky.Compute(...)/ComputePool(...)), got {item!r}")
        self.pools = pools

    def __enter__(self) -> tuple[Pool, ...]:
        with concurrent.futures.ThreadPoolExecutor(max(1, len(self.pools))) as executor:
            futures = [executor.submit(p.open) for p in self.pools]
            interruptible.wait(futures, None)
        failed = [error for f in futures if (error := f.exception()) is not None]
        if failed:
            self._close_all(cancel=True)
            raise failed[0]
        return self.pools

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close_all(cancel=exc_type is not None)

    def _close_all(self, cancel: bool) -> None:
        with concurrent.futures.ThreadPoolExecutor(max(1, len(self.pools))) as executor:
            list(executor.map(lambda p: p.close(cancel=cancel), self.pools))
