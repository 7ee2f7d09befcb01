"""Shared fixtures: real pools (real Ray, real agent processes).

``pytest --provider ssh`` runs the tests that use the shared ``pool4`` on a 4-host SSH
pool (throwaway hosts from tests/hosts.py) instead of a local one, and only those.
``pytest --provider fake`` runs them on an in-process cluster (tests/fake_cluster.py):
the one engine without Ray; tests needing what it lacks (collections, metrics) skip.
``pytest --provider relay`` runs them on that cluster behind the head relay's server
(``FakeProvider(relayed=True)``): every call, broadcast and event crosses the relay
protocol, its handshake and its codec, in-process.
``pytest --provider container`` runs them on ``sky.Container()`` against the local Docker
Engine API (tests/cloud/fake_docker.py), whose four containers are test hosts.
``pytest --provider kept`` runs them on a kept local pool (``Options(keep_alive=...)``)
adopted by the session: every call, broadcast, event and collection operation goes
through the pool daemon's relay (tests/e2e/test_kept_pools.py shows a script doing so
without importing Ray).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import skyward as sky

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--provider", choices=("local", "ssh", "fake", "relay", "container", "kept"), default="local",
        help="where the shared pool4 runs; with ssh, fake, relay, container or kept only the tests using it are run",
    )


def pytest_report_header(config: pytest.Config) -> str:
    """Which clouds' expensive tests run (tests/e2e/cloud/rotation.py)."""
    from e2e.cloud import rotation

    return rotation.describe()


CI_SKIPS = {
    "rotated out this commit (CI)": "a cloud whose pool tests are not in this commit's rotation (tests/e2e/cloud/rotation.py)",
    "no NVIDIA GPU": "the CI machine has no GPU",
    "this machine has a GPU": "the test of the no-GPU path, on a machine with one",
    "the fake cluster has no": "the in-process fake cluster lacks what the test needs (it runs on every other provider)",
}
"""The only reasons a test may skip under ``CI=true`` (a part of the reason -> why that is
fine); any other skip fails the run there, naming its reason (docs/testing.md)."""


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``CI=true``, a skip whose reason is not allowed by ``CI_SKIPS`` is a failure."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not (_in_ci() and report.skipped and not hasattr(report, "wasxfail")):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not any(allowed in reason for allowed in CI_SKIPS):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true: {reason}\nA skip in CI hides a test that does not run; only the reasons in "
            "tests/conftest.py CI_SKIPS may skip there. Install what the test needs (scripts/system_deps.sh, the "
            "extras in scripts/test.sh) or run it where it can."
        )


NETWORK_FAULTS = ("test_network_faults", "test_histories_under_faults", "test_cloud_network_faults")
"""Modules that break the host lab's network (partitions between hosts, every connection
of this machine reset, its address moved): every pool on the lab's hosts lives through
them, so they run after the modules that share a session-wide pool (``ssh_pool``)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--provider") == "local":
        # tests that count what their pool's private Ray instance leaves run before any
        # session-wide pool (pool4) shares that instance; the network faults last
        items.sort(key=lambda item: (item.module.__name__.split(".")[-1] in NETWORK_FAULTS,
                                     item.get_closest_marker("own_ray") is None))
        return
    kept = [item for item in items if _uses_pool4(item)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def _uses_pool4(item: pytest.Item) -> bool:
    """Directly, or through test_collections' ``pool`` fixture on its "thread" side (not on
    the fake cluster, which has no collections)."""
    if item.config.getoption("--provider") in ("fake", "relay") and item.module.__name__.split(".")[-1].startswith("test_collections"):
        return False
    return _pool4_or_thread_pool(item)


def _pool4_or_thread_pool(item: pytest.Item) -> bool:
    """Directly, or through test_collections' ``pool`` fixture on its "thread" side."""
    if "pool4" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("pool") == "thread"


@pytest.fixture(scope="session")
def pool4(request: pytest.FixtureRequest) -> Iterator[sky.Pool]:
    """One 4-node pool shared by the tests that only dispatch work: local, or on four
    SSH hosts with ``--provider ssh``."""
    options = sky.Options(console=False, logging=False)
    provider = request.config.getoption("--provider")
    if provider == "local":
        with sky.Compute(nodes=4, options=options) as pool:
            yield pool
        return
    if provider == "kept":
        yield from _kept_pool(options)
        return
    if provider in ("fake", "relay"):
        from fake_cluster import FakeProvider

        with sky.Compute(provider=FakeProvider(relayed=provider == "relay"), nodes=4, options=options) as pool:
            yield pool
        return
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    if provider == "container":
        yield from _container_pool(options)
        return
    with HostLab.start(4) as lab:
        provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
        with sky.Compute(provider=provider, nodes=4, options=options) as pool:
            yield pool


@pytest.fixture(scope="session")
def warm_ray(request: pytest.FixtureRequest) -> None:
    """For tests that open local pools of their own: the local Ray instance kept started
    (each such pool then starts in ~1 s) by the shared pool4 when that is local. It is not
    pool4, so a pass on another provider (which runs only the tests that use pool4) leaves
    these tests out: they would open local pools there too."""
    if request.config.getoption("--provider") == "local":
        request.getfixturevalue("pool4")


def _kept_pool(options: sky.Options) -> Iterator[sky.Pool]:
    """A 4-node kept local pool, opened once, let go, then adopted (a private pool daemon
    under a temporary $SKYWARD_HOME, ended afterwards)."""
    import tempfile

    from skyward.providers import daemon_client

    saved = os.environ.get("SKYWARD_HOME")
    with tempfile.TemporaryDirectory(prefix="skykept-") as home:
        os.environ["SKYWARD_HOME"] = home
        kept = options.with_(keep_alive=600.0)
        try:
            with sky.Compute(nodes=4, options=kept):
                pass
            with sky.Compute(nodes=4, options=kept) as pool:
                assert [state.holder for state in daemon_client.kept_pools()] == [os.getpid()], "not adopted"
                yield pool
        finally:
            daemon_client.end_pools("")
            daemon_client.stop_all()
            if saved is None:
                os.environ.pop("SKYWARD_HOME", None)
            else:
                os.environ["SKYWARD_HOME"] = saved


def _container_pool(options: sky.Options) -> Iterator[sky.Pool]:
    """A 4-node ``sky.Container()`` pool on the fake engine, its containers test hosts."""
    from cloud.fake_docker import FakeDocker
    from cloud.machines import Harness
    from e2e.cloud.conftest import environment
    from hosts import HostLab

    with HostLab.start(0) as lab:
        fake = FakeDocker()
        fake.use_subnet(lab.cidr)
        fake.start()
        harness = Harness(lab, fake).start()
        try:
            with environment(fake.env()), sky.Compute(provider=sky.Container(), nodes=4, options=options) as pool:
                yield pool
        finally:
            harness.stop()
            fake.stop()


@pytest.fixture(scope="session")
def pool2_concurrent() -> Iterator[sky.Pool]:
    """A 2-node pool with 2 task slots per node."""
    options = sky.Options(console=False, logging=False, worker=sky.Worker(concurrency=2))
    with sky.Compute(nodes=2, options=options) as pool:
        yield pool


@pytest.fixture(scope="session")
def probe() -> Iterator[object]:
    """A second, unprivileged account and the probe it runs (tests/stranger.py)."""
    from stranger import stranger

    with stranger() as account:
        yield account


@pytest.fixture
def marks() -> Iterator[Path]:
    """A directory for the markers a malicious pickle would create if a pool's process
    (this user's, on this machine or on a test host) loaded it: under /var/tmp, which the
    test hosts share with this machine (their /tmp is their own)."""
    from stranger import marks_dir

    with marks_dir("/var/tmp") as directory:
        yield directory
