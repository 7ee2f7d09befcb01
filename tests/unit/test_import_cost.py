"""``import skyward`` loads no engine: Ray is imported when the first pool opens (issue 17,
import ≤ 0.3 s; the time itself is measured in benchmarks/, B4-import)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_importing_skyward_does_not_import_ray() -> None:
    code = "import sys, skyward; print(sorted(m for m in ('ray', 'boto3', 'asyncssh') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "ray" not in loaded.stdout, loaded.stdout


def test_the_storage_package_imports_a_module_on_the_first_use_of_its_names() -> None:
    code = (
        "import sys, skyward.storage as storage\n"
        "before = sorted(m for m in sys.modules if m.startswith('skyward.storage.'))\n"
        "assert storage.S3.__module__ == 'skyward.storage.presets'\n"
        "assert sorted(storage.__all__) == storage.__all__ and 'Volume' in storage.__all__\n"
        "print(before, 'skyward.storage.presets' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert loaded.stdout.strip() == "[] True", loaded.stdout


def test_sky_ls_loads_neither_the_event_machinery_nor_package_metadata(tmp_path: Path) -> None:
    """``sky ls`` answers from the registry and the pool daemon: the events, their bus and
    ``importlib.metadata`` (tens of milliseconds each) are not on its path (CLI-ls in
    docs/benchmarks.md)."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', sorted(m for m in ('skyward.observe.events', 'skyward.observe.bus', "
        "'importlib.metadata', 'ray') if m in sys.modules)))\n"
        "sys.argv = ['sky', 'ls']\n"
        "from skyward.cli.main import main\n"
        "main()\n"
    )
    env = {**os.environ, "SKYWARD_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LOADED []" in done.stdout, done.stdout


def test_a_local_pools_first_open_imports_nothing_only_some_pools_use() -> None:
    """What B4-import counts (``import skyward`` and the modules a local pool's first open
    imports) leaves out what only some pools use: the live panel and rich (a terminal's),
    the older reference's events (someone subscribing to them), a kept pool's client, the
    wheel builder with packaging (an Image that installs), the storage machinery (a pool
    with volumes), the process executor with ``multiprocessing`` (``executor="process"``),
    ``difflib`` (an error's "did you mean"), and the config file's reader and the pool
    daemon's client (a pool opened by name)."""
    later = (
        "rich", "skyward.observe.rich_console", "skyward.observe.legacy", "skyward.providers.kept.client",
        "skyward.providers.ssh.wheels", "skyward.storage.volume", "skyward.storage.client", "skyward.storage.mount",
        "skyward.node.process_executor", "multiprocessing.connection", "difflib", "skyward.api.config_file",
        "tomllib", "skyward.providers.daemon_client", "skyward.providers.kept.state",
    )
    code = (
        "import sys, skyward, ray, skyward.api.compute, skyward.api.pool, skyward.providers.local.launch, "
        "skyward.providers.ray.agents, skyward.observe.console, skyward.observe.bus, skyward.node.agent\n"
        "skyward.Compute  # the public name a script opens a pool with\n"
        f"print(sorted(m for m in {later!r} if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_a_local_pools_first_open_defines_as_dataclasses_only_classes_users_build() -> None:
    """CPython 3.11 defines a frozen dataclass with an ``exec`` per generated method
    (about 0.3 ms a class here) and a ``msgspec.Struct`` in about 20 us: skyward's own
    records on B4-import's path are Structs. The dataclasses left there are those the
    reference documents make dataclasses (``Spec``, ``Image``, the events, ...), those
    users build or ``dataclasses.replace`` in their code (``Plugin``, the ``LaunchCommand``
    and ``LaunchContext`` a plugin's launcher gets, ``Yielded``, an event), and
    ``AgentSetup``, which uses what a Struct lacks: a field left out of the repr and the
    comparison (its lane secret) and keyword-only fields after positional ones. (The
    storage's two, ``ResolvedStorage`` and ``MountedVolume``, load only for a pool with
    volumes.)"""
    code = (
        "import dataclasses, sys, skyward, ray, skyward.api.pool, skyward.providers.local.launch, "
        "skyward.providers.ray.agents\n"
        "made = sorted(f'{name}.{cls.__name__}' for name, module in list(sys.modules.items()) "
        "if name.startswith('skyward') for cls in vars(module).values() "
        "if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls) "
        "and cls.__name__ not in skyward.__all__)\n"
        "print(made)"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    users = [
        "skyward.engine.streams.Yielded", "skyward.model.plugin.LaunchCommand", "skyward.model.plugin.LaunchContext",
        "skyward.model.plugin.Plugin", "skyward.node.agent.AgentSetup",
    ]  # the public ones are in skyward.__all__
    assert loaded.stdout.strip() == str(sorted(users)), loaded.stdout
