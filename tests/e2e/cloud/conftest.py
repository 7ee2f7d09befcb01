"""Fixtures for cloud providers against local emulators (tests/cloud): each test module
gets its own emulator and its own ``SKYWARD_HOME``, so caches, keys and the registry of
live pools never leak between tests or into the user's."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.aws_emulator import ENV_KEYS, AWSEmulator


@pytest.fixture(scope="module")
def aws() -> Iterator[AWSEmulator]:
    """A local AWS; the process talks to it while the module runs."""
    home = tempfile.mkdtemp(prefix="skyward-home-")
    # The wheels shipped to nodes are the same for every test: share the user's cache.
    shared = Path("~/.skyward/wheels").expanduser()
    shared.mkdir(parents=True, exist_ok=True)
    os.symlink(shared, os.path.join(home, "wheels"))
    saved = {key: os.environ.get(key) for key in (*ENV_KEYS, "SKYWARD_HOME")}
    with AWSEmulator() as emulator:
        os.environ.update({**emulator.env(), "SKYWARD_HOME": home})
        from skyward.providers.aws import session

        session._sessions.clear()
        try:
            yield emulator
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            session._sessions.clear()
            shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def machines(aws: AWSEmulator) -> Iterator[Any]:
    """The emulator's instances as real test hosts (needs root for network namespaces)."""
    from cloud.machines import Machines
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(0) as lab:
        running = Machines(aws, lab).start()
        try:
            yield running
        finally:
            running.stop()
