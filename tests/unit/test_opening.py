"""Opening and closing a pool (``skyward.api.opening``): an open pool holds an ``OpenPool``
with everything set, closing it runs the steps in the order a pool has always closed in,
and a failure half-way through opening unwinds exactly what was acquired, in reverse.
In-process nodes (the fake cluster); each step is recorded where it happens."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fake_cluster import FakeProvider, NoCollections
from msgspec import structs

import skyward as sky
from skyward.api.opening import OpenPool
from skyward.engine.driver import PoolDriver
from skyward.engine.events import EventFeed
from skyward.engine.reconciler import Reconciler
from skyward.model.plugin import Plugin
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster

QUIET = sky.Options(console=False, logging=False)


@sky.function
def double(x: int) -> int:
    return 2 * x


class _Transport:
    """The fake transport, recording when it opens and closes (``fail_open``: it raises)."""

    def __init__(self, inner: Any, steps: list[str], fail_open: bool) -> None:
        self._inner, self._steps, self._fail_open = inner, steps, fail_open

    def open(self, loop: Any, feed: Any) -> None:
        self._steps.append("transport.open")
        if self._fail_open:
            raise ConnectionError("the agents did not answer")
        self._inner.open(loop, feed)

    def close(self) -> None:
        self._steps.append("transport.close")
        self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Collections(NoCollections):
    """The fake cluster's collections, recording their release (``fail``: it raises)."""

    def __init__(self, steps: list[str], fail: bool) -> None:
        self._steps, self._fail = steps, fail

    def release(self) -> None:
        self._steps.append("collections.release")
        if self._fail:
            raise ConnectionError("the collection hosts could not be reached")


@dataclasses.dataclass(frozen=True)
class _Recorded(FakeProvider):
    steps: list[str] = dataclasses.field(default_factory=list, compare=False, hash=False)
    fail_open: bool = False
    fail_release: bool = False

    def launch(self, spec: sky.Spec, options: sky.Options, pool_id: str) -> LaunchedCluster:
        cluster = FakeProvider.launch(self, spec, options, pool_id)
        steps = self.steps

        def stop() -> None:
            steps.append("cluster.stop")
            cluster.stop()

        transport = _Transport(cluster.transport, steps, self.fail_open)
        collections = _Collections(steps, self.fail_release)
        return structs.replace(cluster, transport=transport, collections=collections, stop=stop)


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The closing steps the pool takes, in order (registry writes kept off the disk)."""
    taken: list[str] = []

    def record(name: str, original: Any) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            taken.append(name)
            return original(*args, **kwargs)

        return step

    monkeypatch.setattr(PoolDriver, "close", record("driver.close", PoolDriver.close))
    monkeypatch.setattr(Reconciler, "stop", record("reconciler.stop", Reconciler.stop))
    monkeypatch.setattr(EventFeed, "stop", record("feed.stop", EventFeed.stop))
    monkeypatch.setattr(registry, "register", lambda *args, **kwargs: taken.append("registry.register"))
    monkeypatch.setattr(registry, "unregister", lambda pool_id: taken.append("registry.unregister"))
    return taken


def _plugin(steps: list[str], fail: bool = False) -> Plugin:
    @contextlib.contextmanager
    def around(pool: Any, cluster: Any) -> Iterator[None]:
        steps.append(f"plugin.enter open={pool.is_active}")
        if fail:
            raise RuntimeError("the plugin refused")
        yield
        steps.append("plugin.exit")

    return Plugin.create("recorder").with_around_client(around)


def _pool(
    steps: list[str], nodes: int = 2, fail_open: bool = False, fail_plugin: bool = False, fail_release: bool = False
) -> sky.Pool:
    provider = _Recorded(steps=steps, fail_open=fail_open, fail_release=fail_release)
    spec = sky.Spec(provider=provider, nodes=nodes, plugins=(_plugin(steps, fail_plugin),))
    pool = sky.Compute(spec, options=QUIET)

    def event(e: sky.Event) -> None:
        if isinstance(e, (sky.InstanceDestroyed, sky.CostFinal, sky.ClusterDestroyed, sky.ClusterReady)):
            steps.append(type(e).__name__)
        elif isinstance(e, sky.Error):
            steps.append(f"Error: {e.message}")

    pool.on(sky.Event, event)
    return pool


def test_an_open_pool_holds_everything_and_closes_in_the_old_order(steps: list[str]) -> None:
    pool = _pool(steps)
    assert pool._open is None
    with pool:
        running = pool._open
        assert isinstance(running, OpenPool)
        assert all(getattr(running, name) is not None for name in running.__struct_fields__
                   if name not in ("reconciler", "dashboard"))  # made only when asked for
        assert running.reconciler is not None  # the fake cluster can change
        assert pool.spec is running.spec and running.loop_thread.is_alive()
        assert double(21) >> pool == 42
        opened = list(steps)
        del steps[:]
    assert opened == ["transport.open", "registry.register", "ClusterReady", "plugin.enter open=True"]
    assert steps == [
        "plugin.exit", "driver.close", "reconciler.stop", "registry.unregister", "transport.close", "feed.stop",
        "collections.release", "cluster.stop", "InstanceDestroyed", "InstanceDestroyed", "CostFinal", "ClusterDestroyed",
    ]
    assert pool._open is None and not running.loop_thread.is_alive() and running.loop.is_closed()
    assert pool.spec is running.spec  # which Spec it opened with stays known


def test_a_release_of_the_collections_that_fails_still_stops_the_nodes(steps: list[str]) -> None:
    """Nothing is left running for want of the collections' release: the nodes stop,
    and the failure is reported."""
    with _pool(steps, fail_release=True) as pool:
        assert double(4) >> pool == 8
        del steps[:]
    closing = steps[steps.index("collections.release"):]
    assert closing[:3] == [
        "collections.release", "cluster.stop", "Error: teardown: the collection hosts could not be reached"
    ], steps
    assert "ClusterDestroyed" in closing


def test_a_failure_half_way_unwinds_exactly_what_was_acquired(steps: list[str]) -> None:
    pool = _pool(steps, fail_open=True)
    with pytest.raises(ConnectionError, match="did not answer"):
        pool.open()
    assert steps == [
        "transport.open", "transport.close", "feed.stop", "collections.release", "cluster.stop",
        "InstanceDestroyed", "InstanceDestroyed", "CostFinal", "ClusterDestroyed",
    ]  # no driver, reconciler, registry record or plugin was there to undo; the nodes announced are reported gone
    assert pool._open is None and not pool.is_active
    assert not [t for t in threading.enumerate() if t.name == f"skyward-{pool.name}"]  # the pool's loop
    with pytest.raises(sky.PoolClosedError, match="is not open"):
        double(1) >> pool
    with pytest.raises(RuntimeError, match="already opened"):
        pool.open()


def test_a_plugin_that_fails_to_enter_unwinds_the_whole_pool(steps: list[str]) -> None:
    pool = _pool(steps, fail_plugin=True)
    with pytest.raises(RuntimeError, match="the plugin refused"):
        pool.open()
    assert steps == [
        "transport.open", "registry.register", "ClusterReady", "plugin.enter open=True",
        "driver.close", "reconciler.stop", "registry.unregister", "transport.close", "feed.stop",
        "collections.release", "cluster.stop", "InstanceDestroyed", "InstanceDestroyed", "CostFinal", "ClusterDestroyed",
    ]
    assert pool._open is None and not pool.is_active


def test_a_pool_is_not_usable_before_it_opens_nor_after_it_closes(steps: list[str]) -> None:
    pool = _pool(steps, nodes=1)
    with pytest.raises(sky.PoolClosedError, match="is not open"):
        double(1) >> pool
    assert pool.current_nodes() == 0
    with pool:
        assert pool.current_nodes() == 1
    for use in (lambda: double(1) >> pool, lambda: pool.map(double, [1]), lambda: pool.resize(2)):
        with pytest.raises(sky.PoolClosedError, match="is not open"):
            use()
    pool.close()  # closing twice is a no-op
    assert pool.current_nodes() == 0
