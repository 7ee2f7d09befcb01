"""A custom plugin on a local pool: each of its hooks fires once where it should (client,
agents, executor children, tasks), in order, and several plugins compose in the order
listed."""

from __future__ import annotations

import collections
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import skyward as sky
from skyward.plugins import Plugin

from .recording import recording_plugin

QUIET = {"console": False, "logging": False}


@sky.function
def facts() -> tuple[str | None, str | None, int]:
    info = sky.instance_info()
    return os.environ.get("RECORDED"), os.environ.get("LAUNCHED"), info.worker


def _lines(log: Path) -> list[str]:
    return [line.rsplit(" pid=", 1)[0] for line in log.read_text().splitlines()]


def test_every_hook_fires_where_it_should(tmp_path: Path) -> None:
    log = tmp_path / "hooks.log"
    options = sky.Options(**QUIET, worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=2, plugins=[recording_plugin(str(log))], options=options) as pool:
        results = facts() @ pool
        facts() >> pool
        opened = _lines(log)
    lines = _lines(log)
    counts = collections.Counter(lines)
    # client: once per pool, before anything starts
    assert lines[:3] == ["transform nodes=2 provider=local", "bootstrap-hook", "bootstrap-op"]
    assert counts["client-enter nodes=2 open=True"] == 1 and counts["client-exit"] == 1
    assert "client-exit" not in opened  # held while the pool is open
    # agents: launched through the launcher, around_app once per node for its lifetime
    assert counts["launcher role=agent node=0"] == counts["launcher role=agent node=1"] == 1
    assert counts["app-enter node=0 worker=0"] == counts["app-enter node=1 worker=0"] == 1
    assert counts["app-exit node=0"] == counts["app-exit node=1"] == 1
    # executor children: one per node here (reused), launcher and around_process once each
    assert counts["launcher role=process node=0"] == counts["launcher role=process node=1"] == 1
    assert counts["process-enter node=0 worker=0"] == counts["process-enter node=1 worker=0"] == 1
    assert counts["process-exit node=0"] == counts["process-exit node=1"] == 1
    # tasks: decorated once each (3 tasks), seeing the Image's env the transform added
    assert counts["decorate env=1"] == 3
    assert results == [("1", "process", 0), ("1", "process", 0)]
    # exits come after the tasks, the client's first
    assert lines.index("client-exit") > max(i for i, line in enumerate(lines) if line.startswith("decorate"))


def test_thread_executor_has_no_children(tmp_path: Path) -> None:
    """With the thread executor tasks run in the agent: around_app covers them, and
    neither around_process nor a child launcher fires."""
    log = tmp_path / "hooks.log"
    with sky.Compute(nodes=1, plugins=[recording_plugin(str(log))], options=sky.Options(**QUIET)) as pool:
        assert facts() >> pool == ("1", "agent", 0)
    counts = collections.Counter(_lines(log))
    assert counts["app-enter node=0 worker=0"] == 1 and counts["decorate env=1"] == 1
    assert not [line for line in counts if line.startswith(("process-", "launcher role=process"))]


def _tagging(name: str, log: Path) -> Plugin:
    def decorate(fn: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            return [f"{name}>", *fn(*args), f"<{name}"]

        return wrapped

    @contextlib.contextmanager
    def around(info: Any) -> Iterator[None]:
        with open(log, "a") as out:
            out.write(f"enter {name}\n")
        yield
        with open(log, "a") as out:
            out.write(f"exit {name}\n")

    def transform(image: sky.Image, cluster: Any) -> sky.Image:
        order = image.env.get("ORDER", "")
        return sky.Image(env={**image.env, "ORDER": order + name})

    return (
        Plugin.create(name).with_decorator(decorate).with_around_app(around).with_image_transform(transform)
    )


@sky.function
def body() -> list[str]:
    return [os.environ["ORDER"]]


def test_plugins_compose_in_the_order_listed(tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    with sky.Compute(plugins=[_tagging("a", log), _tagging("b", log)], options=sky.Options(**QUIET)) as pool:
        assert body() >> pool == ["a>", "b>", "ab", "<b", "<a"]  # first listed: outermost
    assert log.read_text().split("\n")[:-1] == ["enter a", "enter b", "exit b", "exit a"]


def test_a_hook_error_names_the_plugin() -> None:
    def broken(image: sky.Image, cluster: Any) -> sky.Image:
        raise RuntimeError("no good")

    with pytest.raises(RuntimeError, match="no good") as raised:
        with sky.Compute(plugins=[Plugin.create("fragile").with_image_transform(broken)], options=sky.Options(**QUIET)):
            pass
    assert "plugin 'fragile'" in "".join(raised.value.__notes__)
    with pytest.raises(TypeError, match="transform hook of plugin 'lazy' returned NoneType"):
        with sky.Compute(plugins=[Plugin.create("lazy").with_image_transform(lambda i, c: None)], options=sky.Options(**QUIET)):
            pass


def test_spec_plugins_holds_only_plugins() -> None:
    with pytest.raises(ValueError, match=r"Spec.plugins\[1\]=.*not valid"):
        sky.Spec(provider=sky.Local(), plugins=[Plugin.create("a"), "torch"])
    with pytest.raises(ValueError, match="must be called"):
        sky.Spec(provider=sky.Local(), plugins=[sky.plugins.keras])
    with pytest.raises(ValueError, match="more than once"):
        sky.Spec(provider=sky.Local(), plugins=[Plugin.create("a"), Plugin.create("a")])
    with pytest.raises(TypeError, match="must be callable"):
        Plugin.create("a").with_decorator(42)  # type: ignore[arg-type]
