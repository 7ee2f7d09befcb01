"""The original's three parity items on SSH hosts, as tests/e2e/test_elastic.py and the
unit tests check them locally: the warming gate holds the open until every host passed
its check, ``skyward.accelerators`` imports as a module on a node, and a Storage whose
credentials are callables of the client's resolves there (``Storage.resolve()``) and
works on the nodes, where the callables could not run."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import QUIET, ssh_provider
from hosts import HostLab
from storage_server import MotoServer

import skyward as sky
from skyward.storage import StorageCredentialsError


def _warm_check(flag: str) -> Callable[[], bool]:
    """Passes once ``flag`` exists on the node's host (its /tmp is the host's own)."""

    def _warmed_up() -> bool:
        return os.path.exists(flag)

    return _warmed_up


@sky.function
def accelerator_names() -> tuple[str, str]:
    """What ``from skyward.accelerators import ...`` gives on a node."""
    from skyward.accelerators import A100, H100

    return A100().name, H100(count=8).name


@sky.function
def listed(storage: sky.Storage, bucket: str) -> list[str]:
    with storage:
        return storage.ls(bucket)


@pytest.fixture(scope="module")
def s3(lab: HostLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer.start(tmp_path_factory.mktemp("moto-parity"), host=lab.gateway)
    yield server
    server.stop()


def test_the_gate_accelerators_and_resolved_storage_on_ssh_hosts(lab: HostLab, s3: MotoServer, tmp_path: Path) -> None:
    hosts = lab.hosts[:2]
    flag_name = f"warm-{tmp_path.name}"
    flag = f"/tmp/{flag_name}"  # each host's private /tmp
    checker = sky.HealthChecker(check=_warm_check(flag), gate=True, warmup=120, interval=30, timeout=10)
    pool = sky.Compute(
        provider=ssh_provider(lab, hosts=lab.strings()[:2]), nodes=2, options=QUIET.with_(health_checker=checker),
    )
    ready: list[float] = []
    pool.on(sky.ClusterReady, lambda event: ready.append(time.monotonic()))
    provisioned = threading.Event()  # every host runs its agent: without the gate the pool is ready now
    pool.on(sky.ClusterProvisioned, lambda event: provisioned.set())
    warm_at: list[float] = []

    def warm_once_the_hosts_are_up() -> None:
        provisioned.wait(300)
        time.sleep(4)
        warm_at.append(time.monotonic())
        for host in hosts:
            Path(host.private("/tmp"), flag_name).touch()

    threading.Thread(target=warm_once_the_hosts_are_up, daemon=True).start()
    secret = tmp_path / "secret"  # the client's alone: the hosts' /tmp is their own
    secret.write_text(s3.secret_key)
    key, secret_path = s3.access_key, str(secret)
    storage = sky.Storage(s3.endpoint, access_key=lambda: key, secret_key=lambda: Path(secret_path).read_text(),
                          path_style=True)
    bucket = s3.new_bucket()
    s3.client().put_object(Bucket=bucket, Key="weights.bin", Body=b"w")
    try:
        with pool:
            assert warm_at and ready and ready[0] >= warm_at[0], "the pool was ready before its hosts were warm"
            assert accelerator_names() @ pool == [("A100", "H100")] * 2
            assert listed(storage.resolve(), bucket) @ pool == [["weights.bin"]] * 2
            with pytest.raises(StorageCredentialsError, match="secret_key"):
                listed(storage, bucket) >> pool  # unresolved: the callable reads a file the hosts do not have
    finally:
        for host in hosts:
            Path(host.private("/tmp"), flag_name).unlink(missing_ok=True)
        s3.drop_bucket(bucket)
