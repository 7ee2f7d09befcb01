"""Calling the plugins' client-side hooks, composed in the order the plugins are listed.

``transform`` hooks chain (each gets the Image the previous returned); ``bootstrap`` ops
are concatenated; ``around_client`` context managers are entered in order and exited in
reverse; ``launcher`` hooks chain. An error a hook raises is re-raised with a note
naming the plugin and the hook.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, overload

from skyward.core.instance import InstanceInfo
from skyward.image.image import Image
from skyward.image.script import BootstrapOp
from skyward.model.plugin import (
    AroundClient,
    AroundNode,
    Decorate,
    LaunchCommand,
    LaunchContext,
    Plugin,
    WorkersPerNode,
)
from skyward.model.spec import Spec

if TYPE_CHECKING:
    from skyward.model.cluster import Cluster


@contextmanager
def blame(plugin: Plugin, hook: str) -> Iterator[None]:
    """Add a note naming ``plugin`` and ``hook`` to whatever the block raises."""
    try:
        yield
    except BaseException as exc:
        exc.add_note(f"raised by the {hook} hook of plugin {plugin.name!r}")
        raise


def _wrong_result(plugin: Plugin, hook: str, returned: str, must: str) -> TypeError:
    """The TypeError for ``plugin``'s ``hook`` having returned ``returned`` (as the message
    shows it) where ``must`` says what it has to return."""
    return TypeError(f"the {hook} hook of plugin {plugin.name!r} returned {returned}; {must}")


def transform_image(plugins: Sequence[Plugin], image: Image, cluster: Cluster) -> Image:
    """``image`` after every plugin's ``transform``; TypeError when one returns no Image."""
    for plugin in plugins:
        if plugin.transform is None:
            continue
        with blame(plugin, "transform"):
            changed = plugin.transform(image, cluster)
        if not isinstance(changed, Image):
            must = "it must return a sky.Image (e.g. dataclasses.replace(image, pip=...))"
            raise _wrong_result(plugin, "transform", type(changed).__name__, must)
        image = changed
    return image


def with_plugins_image(spec: Spec, cluster: Cluster) -> Spec:
    """``spec`` with its Image transformed by its plugins (``spec`` itself when none has a transform)."""
    if not any(plugin.transform for plugin in spec.plugins):
        return spec
    return replace(spec, image=transform_image(spec.plugins, spec.image, cluster))


def bootstrap_ops(plugins: Sequence[Plugin], cluster: Cluster) -> tuple[BootstrapOp, ...]:
    """Every plugin's ``bootstrap`` shell ops, in order; TypeError for an op that is not a str."""
    ops: list[BootstrapOp] = []
    for plugin in plugins:
        if plugin.bootstrap is None:
            continue
        with blame(plugin, "bootstrap"):
            commands = plugin.bootstrap(cluster)
        if isinstance(commands, str) or not all(isinstance(c, str) for c in commands):
            must = 'it must return a tuple of shell commands, e.g. ("echo hi",)'
            raise _wrong_result(plugin, "bootstrap", repr(commands), must)
        ops.extend(BootstrapOp(plugin.name, command) for command in commands)
    return tuple(ops)


def launch_command(plugins: Sequence[Plugin], command: LaunchCommand, context: LaunchContext) -> LaunchCommand:
    """``command`` after every plugin's ``launcher``; TypeError when one returns no LaunchCommand."""
    for plugin in plugins:
        if plugin.launcher is None:
            continue
        with blame(plugin, "launcher"):
            changed = plugin.launcher(command, context)
        if not isinstance(changed, LaunchCommand) or not changed.python:
            must = (
                "it must return a LaunchCommand with a non-empty python command "
                "(dataclasses.replace(command, python=...))"
            )
            raise _wrong_result(plugin, "launcher", repr(changed), must)
        command = changed
    return command


def agent_launch(plugins: Sequence[Plugin], python: str | None, info: InstanceInfo) -> LaunchCommand | None:
    """How the node's agent starts: ``python`` (None: Ray's default interpreter, this
    one) rewritten by the launchers; None when nothing differs from Ray's default."""
    if python is None and not any(plugin.launcher for plugin in plugins):
        return None
    command = LaunchCommand((python or sys.executable,))
    return launch_command(plugins, command, LaunchContext(info, "agent"))


def ray_options(launch: LaunchCommand | None) -> dict[str, object]:
    """The Ray actor options that start an agent with ``launch`` (none for Ray's default)."""
    if launch is None:
        return {}
    runtime_env: dict[str, object] = {"py_executable": shlex.join(launch.python)}
    if launch.env:
        runtime_env["env_vars"] = dict(launch.env)
    return {"runtime_env": runtime_env}


@overload
def each(
    plugins: Sequence[Plugin], hook: Literal["around_app", "around_process"]
) -> Iterator[tuple[Plugin, AroundNode]]: ...


@overload
def each(plugins: Sequence[Plugin], hook: Literal["around_client"]) -> Iterator[tuple[Plugin, AroundClient]]: ...


@overload
def each(plugins: Sequence[Plugin], hook: Literal["decorate"]) -> Iterator[tuple[Plugin, Decorate]]: ...


@overload
def each(plugins: Sequence[Plugin], hook: Literal["workers_per_node"]) -> Iterator[tuple[Plugin, WorkersPerNode]]: ...


def each(
    plugins: Sequence[Plugin], hook: str
) -> Iterator[tuple[Plugin, AroundNode | AroundClient | Decorate | WorkersPerNode]]:
    """The plugins that have ``hook``, with it."""
    for plugin in plugins:
        fn = getattr(plugin, hook)
        if fn is not None:
            yield plugin, fn
