"""``Plugin``: a named bundle of hooks that prepare a pool's environment and wrap its work.

Build one with ``Plugin.create(name)`` and the ``with_*`` builders (each returns a new
frozen plugin), and pass it in ``Spec.plugins``. Each hook is optional; when several
plugins are given they compose in the order listed (see ``skyward.plugins.hooks``).

Hook              called with                    where and when
----------------  -----------------------------  -----------------------------------------
transform         (Image, Cluster) -> Image      client, at open, before the nodes' environment is built
bootstrap         Cluster -> tuple[str, ...]     the nodes' shell (remote: each node after the Image's
                                                 steps; local: once on this machine, in the pool's env)
decorate          fn -> fn                       node, around every task
around_app        InstanceInfo -> ContextManager node, the agent process's lifetime (entered once)
around_process    InstanceInfo -> ContextManager node, each executor child's lifetime (executor="process")
around_client     (Pool, Cluster) -> CM          client, from the pool being ready to its close
launcher          (LaunchCommand, LaunchContext) node processes' launch: the agent's interpreter
                  -> LaunchCommand               command and each executor child's command
workers_per_node  InstanceInfo -> int            node, at agent start (skyward's addition, used by mig)
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from skyward.core.context import DispatchTarget

if TYPE_CHECKING:
    from skyward.core.instance import InstanceInfo
    from skyward.image.image import Image
    from skyward.model.cluster import Cluster
    from skyward.model.spec import Options

Role = Literal["agent", "process"]


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """How a node process starts: ``python`` is the interpreter command (a launcher may
    prefix it, e.g. ``("nice", "-n", "5", python)``), ``args`` what follows it (empty
    for an agent: Ray adds its worker arguments), ``env`` extra environment variables."""

    python: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return [*self.python, *self.args]


@dataclass(frozen=True, slots=True)
class LaunchContext:
    """What is being launched: the node's ``info`` and the ``role`` ("agent": the node's
    long-lived worker process; "process": one executor child of it)."""

    info: InstanceInfo
    role: Role


Transform = Callable[["Image", "Cluster"], "Image"]
Bootstrap = Callable[["Cluster"], tuple[str, ...]]
Decorate = Callable[[Callable[..., object]], Callable[..., object]]
AroundNode = Callable[["InstanceInfo"], AbstractContextManager[object]]
AroundClient = Callable[["ClientPool", "Cluster"], AbstractContextManager[object]]
Launcher = Callable[[LaunchCommand, LaunchContext], LaunchCommand]
WorkersPerNode = Callable[["InstanceInfo"], int]


class ClientPool(DispatchTarget, Protocol):
    """What ``around_client(pool, cluster)`` is given: the open ``sky.Pool`` (its
    dispatch methods, its options, its node count)."""

    @property
    def options(self) -> Options: ...

    def current_nodes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Plugin:
    """A named set of optional hooks (see the module docstring for when each runs).

    Hooks run on nodes travel there pickled (cloudpickle), so they may be lambdas or
    closures; code from your own modules travels by value to remote nodes."""

    name: str
    transform: Transform | None = None
    bootstrap: Bootstrap | None = None
    decorate: Decorate | None = None
    around_app: AroundNode | None = None
    around_process: AroundNode | None = None
    around_client: AroundClient | None = None
    launcher: Launcher | None = None
    workers_per_node: WorkersPerNode | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Plugin.name={self.name!r} is not valid: give a non-empty name such as \"my-plugin\"")
        for hook in _HOOKS:
            value = getattr(self, hook)
            if value is not None and not callable(value):
                raise TypeError(f"Plugin({self.name!r}).{hook} must be callable or None, got {value!r}")

    @classmethod
    def create(cls, name: str) -> Plugin:
        """A plugin with no hooks yet."""
        return cls(name)

    def with_image_transform(self, fn: Transform) -> Plugin:
        """``fn(image, cluster) -> image``: edit the Image on the client before the nodes' environment is built."""
        return replace(self, transform=fn)

    def with_bootstrap(self, fn: Bootstrap) -> Plugin:
        """``fn(cluster) -> ("shell op", ...)``: shell commands run after the Image's steps."""
        return replace(self, bootstrap=fn)

    def with_decorator(self, fn: Decorate) -> Plugin:
        """``fn(task_fn) -> task_fn``: wrap every task on the node."""
        return replace(self, decorate=fn)

    def with_around_app(self, fn: AroundNode) -> Plugin:
        """``fn(info) -> context manager`` held for the node agent process's lifetime."""
        return replace(self, around_app=fn)

    def with_around_process(self, fn: AroundNode) -> Plugin:
        """``fn(info) -> context manager`` held for each executor child's lifetime."""
        return replace(self, around_process=fn)

    def with_around_client(self, fn: AroundClient) -> Plugin:
        """``fn(pool, cluster) -> context manager`` held on the client while the pool is open."""
        return replace(self, around_client=fn)

    def with_launcher(self, fn: Launcher) -> Plugin:
        """``fn(command, context) -> command``: rewrite how node processes start."""
        return replace(self, launcher=fn)

    def with_workers_per_node(self, fn: WorkersPerNode) -> Plugin:
        """``fn(info) -> int``: what ``instance_info().workers_per_node`` says on that node."""
        return replace(self, workers_per_node=fn)


_HOOKS = (
    "transform", "bootstrap", "decorate", "around_app", "around_process", "around_client", "launcher",
    "workers_per_node",
)


def check_plugins(value: object) -> tuple[Plugin, ...]:
    """``Spec.plugins`` as a tuple of ``Plugin``; ValueError naming the item that is not one."""
    if isinstance(value, Plugin):
        value = (value,)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(
            f"Spec.plugins={value!r} is not valid: use a list of plugins, e.g. [sky.plugins.torch()]"
        )
    for index, item in enumerate(value):
        if not isinstance(item, Plugin):
            hint = " (a plugin factory must be called: sky.plugins.torch(), not sky.plugins.torch)" if callable(item) else ""
            raise ValueError(
                f"Spec.plugins[{index}]={item!r} is not valid: use a plugin such as sky.plugins.torch() "
                f"or Plugin.create(name){hint}"
            )
    names = [plugin.name for plugin in value]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"Spec.plugins lists plugin {repeated[0]!r} more than once; list each plugin once")
    return tuple(value)
