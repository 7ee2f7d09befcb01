"""The plugins' node-side hooks, installed once per node process.

The agent installs its pool's plugins at start (``install_agent``: ``workers_per_node``,
then every ``around_app`` entered in order), an executor child does the same with
``around_process`` (``install_process``); both then wrap every task with the plugins'
``decorate`` hooks (the first plugin listed is the outermost wrapper) and rewrite the
commands that start executor children with their ``launcher`` hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from typing import Literal

import cloudpickle

from skyward.core.codec import load_payload
from skyward.core.instance import InstanceInfo
from skyward.model.plugin import LaunchCommand, LaunchContext, Plugin
from skyward.plugins import hooks

_installed: tuple[Plugin, ...] = ()


def pack(plugins: tuple[Plugin, ...], dumps: Callable[[object], bytes] = cloudpickle.dumps) -> bytes:
    """``plugins`` as the bytes an ``AgentSetup`` carries (b"" for none)."""
    return dumps(tuple(plugins)) if plugins else b""


def _load(payload: bytes) -> tuple[Plugin, ...]:
    return tuple(load_payload(payload)) if payload else ()


def install_agent(payload: bytes, info: InstanceInfo) -> tuple[InstanceInfo, ExitStack]:
    """Install the plugins in this agent process: returns the node's info (with the
    plugins' ``workers_per_node``) and the stack holding their ``around_app`` open."""
    global _installed
    _installed = _load(payload)
    for plugin, workers in hooks.each(_installed, "workers_per_node"):
        with hooks.blame(plugin, "workers_per_node"):
            count = workers(info)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"the workers_per_node hook of plugin {plugin.name!r} returned {count!r}; use an int >= 1")
        info = replace(info, workers_per_node=count)
    return info, _enter(_installed, "around_app", info)


def install_process(payload: bytes, info: InstanceInfo) -> ExitStack:
    """Install the plugins in this executor child: the stack holds their ``around_process`` open."""
    global _installed
    _installed = _load(payload)
    return _enter(_installed, "around_process", info)


def _enter(plugins: tuple[Plugin, ...], hook: Literal["around_app", "around_process"], info: InstanceInfo) -> ExitStack:
    stack = ExitStack()
    try:
        for plugin, around in hooks.each(plugins, hook):
            with hooks.blame(plugin, hook):
                stack.enter_context(around(info))
    except BaseException:
        stack.close()
        raise
    return stack


def decorated(fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` wrapped by the installed plugins' ``decorate`` hooks (``fn`` itself when none)."""
    if not _installed:
        return fn
    for plugin, decorate in reversed(list(hooks.each(_installed, "decorate"))):
        with hooks.blame(plugin, "decorate"):
            fn = decorate(fn)
    return fn


def child_command(command: LaunchCommand, info: InstanceInfo) -> LaunchCommand:
    """How an executor child starts, after the installed plugins' launchers."""
    return hooks.launch_command(_installed, command, LaunchContext(info, "process"))
