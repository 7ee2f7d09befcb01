"""A plugin whose every hook appends a line to a file, so a test can count where and how
often each one fired (hooks run in the client, agents and executor children)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from skyward.plugins import Plugin


def _record(log: str, line: str) -> None:
    with open(log, "a") as out:
        out.write(f"{line} pid={os.getpid()}\n")


def recording_plugin(log: str) -> Plugin:
    """Hooks: transform adds RECORDED=1 to the Image's env, bootstrap writes from the
    shell, the node hooks log with their node and worker."""

    def transform(image: Any, cluster: Any) -> Any:
        _record(log, f"transform nodes={cluster.total_nodes} provider={cluster.provider}")
        return replace(image, env={**image.env, "RECORDED": "1"})

    def bootstrap(cluster: Any) -> tuple[str, ...]:
        _record(log, "bootstrap-hook")
        return (f"echo bootstrap-op >> {log}",)

    def decorate(fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            _record(log, f"decorate env={os.environ.get('RECORDED')}")
            return fn(*args, **kwargs)

        return wrapped

    @contextlib.contextmanager
    def around(kind: str, info: Any) -> Iterator[None]:
        _record(log, f"{kind}-enter node={info.node} worker={info.worker}")
        yield
        _record(log, f"{kind}-exit node={info.node}")

    @contextlib.contextmanager
    def around_client(pool: Any, cluster: Any) -> Iterator[None]:
        _record(log, f"client-enter nodes={len(cluster.nodes)} open={pool.is_active}")
        yield
        _record(log, "client-exit")

    def launcher(command: Any, context: Any) -> Any:
        _record(log, f"launcher role={context.role} node={context.info.node}")
        return replace(command, env={**command.env, "LAUNCHED": context.role})

    return (
        Plugin.create("recording")
        .with_image_transform(transform)
        .with_bootstrap(bootstrap)
        .with_decorator(decorate)
        .with_around_app(lambda info: around("app", info))
        .with_around_process(lambda info: around("process", info))
        .with_around_client(around_client)
        .with_launcher(launcher)
    )
