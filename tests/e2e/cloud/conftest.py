"""Fixtures for cloud providers against local emulators and fakes (tests/cloud): each
test module gets its own clouds and its own ``SKYWARD_HOME``, so caches, keys and the
registry of live pools never leak between tests or into the user's."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.aws_emulator import AWSEmulator
from cloud.fake_cloud import summary, unreported
from e2e.cloud import rotation
from sandbox import share_wheels

ROTATED = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``rotated`` test (its cloud named by the marker, or the test's ``cloud``
    parameter) whose cloud is not in this run's rotation is skipped, saying why;
    ``rotated(single=True)`` runs on one cloud of the rotation (``among=``: of those clouds)."""
    for item in items:
        marker = item.get_closest_marker("rotated")
        if marker is None:
            continue
        cloud = marker.args[0] if marker.args else item.callspec.params["cloud"]
        reason = rotation.skip_reason(
            cloud, single=marker.kwargs.get("single", False), among=marker.kwargs.get("among"),
        )
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[ROTATED] = any(item.get_closest_marker("rotated") for item in session.items)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Which clouds' pools ran (shown under -q too, which has no header)."""
    if config.stash.get(ROTATED, False):
        terminalreporter.write_line(rotation.describe())


@pytest.fixture(scope="module", autouse=True)
def _earlier_exchanges() -> None:
    """Forget what fakes made before this module recorded (the unit tests' fakes are sent
    wrong requests on purpose); this module's own are checked by ``described_exchanges``."""
    unreported()


@pytest.fixture(autouse=True)
def described_exchanges() -> Iterator[None]:
    """Fails the test, at its teardown, for every exchange with a fake (during it or its
    fixtures' setup) that the cloud's pinned description of its API does not define or
    would not produce (tests/cloud/described.py), naming the operation and the field."""
    yield
    found = unreported()
    if found:
        pytest.fail("exchanges with the fakes that the clouds' own API descriptions do not allow:\n"
                    + summary(found), pytrace=False)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment (and a fresh ``SKYWARD_HOME``, whose
    wheel cache is the user's) while the block runs; restored after."""
    home = tempfile.mkdtemp(prefix="skyward-home-")
    share_wheels(Path(home))
    values = {**values, "SKYWARD_HOME": home}
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def aws() -> Iterator[AWSEmulator]:
    """A local AWS; the process talks to it while the module runs."""
    from skyward.providers.aws import session

    with AWSEmulator() as emulator, environment(emulator.env()):
        session._sessions.clear()
        try:
            yield emulator
        finally:
            session._sessions.clear()


@pytest.fixture(scope="module")
def lab() -> Iterator[Any]:
    """An empty lab of test hosts for the clouds' machines (needs root)."""
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(0) as started:
        yield started


@pytest.fixture(scope="module")
def machines(aws: AWSEmulator, lab: Any) -> Iterator[Any]:
    """The emulator's instances as real test hosts."""
    from cloud.machines import Machines

    running = Machines(aws, lab).start()
    try:
        yield running
    finally:
        running.stop()
