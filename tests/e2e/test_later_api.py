"""The later reference's forms, as its users write them: ``Session.compute(name=...,
provider=..., nodes=...)``, ``sky.HealthChecker(fn=...)``, ``sky.Nodes(desired=0)`` (a
lazy start), the ``skyward.sky`` singleton and the type names of the older reference.
Real local pools."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable

import pytest

import skyward as sky
from skyward import sky as active
from skyward.model.spec import ProviderConfig
from skyward.providers.ssh.provider import check_remote_nodes

QUIET = sky.Options(console=False, logging=False)
FAST = QUIET.with_(reconcile_tick_interval=0.2, autoscale_cooldown=0.5, autoscale_idle_timeout=2.0)


def eventually(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.05)


@sky.function
def node() -> int:
    info = sky.instance_info()
    assert info is not None
    return info.node


@sky.function
def pid() -> int:
    return os.getpid()


@sky.function
def mark_sick() -> None:
    os.environ["SKYWARD_TEST_SICK"] = "disk full"


def sick_reason(info: sky.InstanceInfo) -> bool | str:
    """The later form's check: True when healthy, else why not."""
    assert isinstance(info, sky.InstanceInfo)
    return os.environ.get("SKYWARD_TEST_SICK") or True


def test_session_compute_takes_a_name_beside_the_fields() -> None:
    with sky.Session(options=QUIET) as session:
        pool = session.compute(name="trainer", provider=sky.Local(), nodes=2)
        assert pool.name == "trainer"
        assert sorted(node() @ pool) == [0, 1]


def test_the_sky_singleton_dispatches_to_the_active_pool() -> None:
    with sky.Compute(nodes=2, options=QUIET):
        assert node() >> active in (0, 1)
        assert sorted(node() @ active) == [0, 1]
        assert (node() > active).result(timeout=60) in (0, 1)
        assert sorted((node() & node()) >> active) in ([0, 0], [0, 1], [1, 1])
        assert "active pool" in repr(active)
    assert pickle.loads(pickle.dumps(active)) is active


def test_a_lazy_pool_opens_with_no_node_and_the_first_task_starts_one() -> None:
    with sky.Compute(nodes=sky.Nodes(desired=0, max=2), options=FAST) as pool:
        assert pool.current_nodes() == 0
        assert node() >> pool == 0
        assert pool.current_nodes() >= 1


def test_lazy_nodes_bounds() -> None:
    lazy = sky.Nodes(desired=0)
    assert (lazy.floor, lazy.ceiling) == (0, 1)
    assert sky.Nodes(desired=0, max=4).ceiling == 4
    with pytest.raises(ValueError, match="Nodes.min"):
        sky.Nodes(desired=0, min=1)
    remote = sky.Spec(provider=sky.Local(), nodes=sky.Nodes(desired=0, max=2))
    with pytest.raises(ValueError, match=r"Options.cluster=None .*Nodes\(desired=0\).*cluster=False"):
        check_remote_nodes(remote, sky.Options())
    check_remote_nodes(remote, sky.Options(cluster=False))


def test_a_node_failing_the_later_form_of_health_check_is_replaced_with_its_reason() -> None:
    replaced: list[sky.InstanceReplaced] = []
    checker = sky.HealthChecker(fn=sick_reason, interval=0.3, consecutive_failures=2, initial_delay=0.5, timeout=5)
    assert (checker.failures, checker.warmup) == (2, 0.5)
    pool = sky.Compute(nodes=2, options=FAST.with_(health_checker=checker))
    pool.on(sky.InstanceReplaced, replaced.append)
    with pool:
        sick = pool.run(pid(), target=1)
        pool.run(mark_sick(), target=1)
        eventually(lambda: any(event.node == 1 for event in replaced), "node 1 replaced")
        assert "disk full" in replaced[0].reason
        eventually(lambda: pool.current_nodes() == 2, "the replacement joining")
        assert pool.run(pid(), target=1) != sick


def test_health_checker_forms_are_exclusive_and_say_so() -> None:
    with pytest.raises(ValueError, match="HealthChecker.check"):
        sky.HealthChecker()
    with pytest.raises(ValueError, match="HealthChecker.check"):
        sky.HealthChecker(check=lambda: True, fn=sick_reason)
    with pytest.raises(ValueError, match="HealthChecker.consecutive_failures.*failures="):
        sky.HealthChecker(fn=sick_reason, failures=5, consecutive_failures=2)
    with pytest.raises(ValueError, match="HealthChecker.fn"):
        sky.HealthChecker(fn=3)  # type: ignore[arg-type]
    checker = sky.HealthChecker(fn=sick_reason)
    assert checker.failure(True) is None
    assert checker.failure("no GPU") == "no GPU"
    assert checker.failure(False) == "it returned False"
    assert sky.HealthChecker(check=lambda: "ok").failure("ok") is None  # the first form: a truthy answer is healthy


def test_the_older_reference_type_names_describe_compute_pool() -> None:
    def prefer_last(providers: tuple[ProviderConfig, ...], spec: sky.ComputeSpec) -> ProviderConfig:
        assert isinstance(spec, sky.Spec)
        return providers[-1]

    selector: sky.ProviderSelector = prefer_last
    providers: sky.ProviderLike = [sky.Local(), sky.Local()]
    selection: sky.SelectionLike = selector
    pool = sky.ComputePool(provider=providers, selection=selection, display="quiet")
    with pool:
        assert node() >> pool == 0
