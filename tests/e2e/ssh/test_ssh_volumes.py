"""Spec.volumes on SSH pools, for real: each host's watchdog mounts the volumes with
s3fs-fuse in the host's own mount namespace before Ray starts, and unmounts them when
the pool closes, when opening fails, and when the client vanishes. The S3 server (moto)
listens on the lab's gateway address, the one address of ours the hosts can reach."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import QUIET, pool_traces, ssh_provider, wait_for
from hosts import HostLab
from sandbox import own_home
from storage_server import MotoServer
from test_remote_options import wait_for_line

import skyward as sky
from skyward.storage import VolumeCredentialsError, VolumeMountError
from skyward.storage.mount import fuse_tool_available

_missing = fuse_tool_available()
pytestmark = pytest.mark.skipif(_missing is not None, reason=f"no FUSE mounts here: {_missing}")
DATA = "/tmp/sky-data"  # /tmp is private to each host: every host makes its own mount point
RUNS = "/tmp/sky-runs"


@pytest.fixture(scope="module")
def s3(lab: HostLab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    pytest.importorskip("moto", reason="moto[server] is not installed (pip install -e '.[test]')")
    server = MotoServer.start(tmp_path_factory.mktemp("moto-lab"), host=lab.gateway)
    yield server
    server.stop()


def storage_of(server: MotoServer) -> sky.Storage:
    return sky.Storage(
        server.endpoint, access_key=server.access_key, secret_key=server.secret_key, path_style=True
    )


def host_mounts(lab: HostLab) -> dict[str, list[str]]:
    """The s3fs mounts in each host's mount namespace (its sshd's)."""
    found = {}
    for host in lab.hosts:
        assert host.sshd is not None
        with open(f"/proc/{host.sshd.pid}/mounts") as mounts:
            found[host.name] = [line.split()[1] for line in mounts if "s3fs" in line.split()[2]]
    return found


def left_on_hosts(lab: HostLab, pool_id: str) -> dict[str, object]:
    """Mounts, s3fs processes, mount points and pool traces still on the hosts."""
    mounts = {name: points for name, points in host_mounts(lab).items() if points}
    points = [
        f"{host.name}:{name}"
        for host in lab.hosts
        for name in os.listdir(host.private("/tmp"))
        if name in ("sky-data", "sky-runs")
    ]
    traces = {kind: found for kind, found in pool_traces(lab, pool_id).items() if found}
    return {
        key: value
        for key, value in {
            "mounts": mounts,
            "s3fs": lab.processes_naming("s3fs"),
            "mount points": points,
            **traces,
        }.items()
        if value
    }


@sky.function
def on_node(data: str, runs: str) -> tuple[int, str, list[str], str]:
    """Read by path on a node; the head also writes a checkpoint; what /proc/mounts shows."""
    with open(os.path.join(data, "sets", "train.csv")) as handle:
        train = handle.read()
    if sky.is_head():
        with open(os.path.join(runs, "epoch-1.txt"), "w") as handle:
            handle.write("weights")
    with open("/proc/mounts") as mounts:
        kinds = sorted(line.split()[2] for line in mounts if line.split()[1] in (data, runs))
    return sky.instance_info().node, train, sorted(os.listdir(data)), ",".join(kinds)


def test_every_host_mounts_reads_writes_and_unmounts_at_close(lab: HostLab, s3: MotoServer) -> None:
    data, runs = s3.new_bucket(), s3.new_bucket()
    s3.client().put_object(Bucket=data, Key="sets/train.csv", Body=b"a,b\n1,2\n")
    storage = storage_of(s3)
    volumes = [
        sky.Volume(bucket=data, mount=DATA, storage=storage),
        sky.Volume(bucket=runs, mount=RUNS, prefix="run-1/", read_only=False, storage=storage),
    ]
    phases: list[sky.BootstrapPhase] = []
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, volumes=volumes, options=QUIET)
    pool.on(sky.BootstrapPhase, phases.append)
    with pool:
        seen = on_node(DATA, RUNS) @ pool
        assert sorted(node for node, *_ in seen) == [0, 1, 2]
        for _, train, listed, kinds in seen:
            assert (train, listed, kinds) == ("a,b\n1,2\n", ["sets"], "fuse.s3fs,fuse.s3fs")
        assert all(len(points) == 2 for points in host_mounts(lab).values()), host_mounts(lab)
    assert sorted(phase.node for phase in phases if phase.phase == "volumes") == [0, 1, 2]
    left = left_on_hosts(lab, pool.id)
    assert not left, f"left on the hosts after close: {left}"
    with storage:
        assert storage.ls(runs) == ["run-1/epoch-1.txt"]
    s3.drop_bucket(data)
    s3.drop_bucket(runs)


def test_a_failing_mount_fails_the_open_naming_the_node(
    lab: HostLab, s3: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A bucket that does not exist: opening fails with the bucket, the mount point, the
    node and S3's answer, and nothing is left mounted on any host. The watchdog that
    reported the failure stopped the pool there and exited: closing does not tell it to
    stop (which logged a warning of a closed channel)."""
    caplog.set_level(logging.WARNING, logger="skyward")
    good = s3.new_bucket()
    volumes = [
        sky.Volume(bucket=good, mount=DATA, storage=storage_of(s3)),
        sky.Volume(bucket="no-such-bucket-here", mount=RUNS, storage=storage_of(s3)),
    ]
    pool = sky.Compute(provider=ssh_provider(lab), nodes=2, volumes=volumes, options=QUIET)
    with pytest.raises(VolumeMountError) as caught:
        with pool:
            pytest.fail("the pool opened")
    message = str(caught.value)
    assert "'no-such-bucket-here'" in message and RUNS in message and "on node " in message
    assert "NoSuchBucket" in message
    left = left_on_hosts(lab, pool.id)
    assert not left, f"left on the hosts after a failed open: {left}"
    told = [record.getMessage() for record in caplog.records if "watchdog on" in record.getMessage()]
    assert not told, told
    s3.drop_bucket(good)


def test_a_storage_without_keys_is_refused_before_anything_reaches_the_hosts(
    lab: HostLab, s3: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine has an AWS credential chain (the environment) that would open the
    bucket, but the storage was given no keys: the hosts get nothing, not even the pool."""
    bucket = s3.new_bucket()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    keyless = sky.Storage(s3.endpoint, path_style=True)
    volumes = [sky.Volume(bucket=bucket, mount=DATA, storage=keyless)]
    pool = sky.Compute(provider=ssh_provider(lab), nodes=2, volumes=volumes, options=QUIET)
    with pytest.raises(VolumeCredentialsError) as caught:
        with pool:
            pytest.fail("the pool opened")
    message = str(caught.value)
    assert f"Spec.volumes[0] (bucket {bucket!r} at {DATA}) has a storage without keys" in message
    assert "never sent to another service" in message
    left = left_on_hosts(lab, pool.id)
    assert not left, f"left on the hosts after a refused open: {left}"
    s3.drop_bucket(bucket)


@pytest.mark.slow
def test_a_vanished_clients_volumes_are_unmounted_after_ttl(lab: HostLab, s3: MotoServer, tmp_path: Path) -> None:
    """A client killed with SIGKILL runs no teardown: each host's watchdog notices the
    closed connection and, ``ttl`` seconds later, stops the pool and unmounts."""
    bucket = s3.new_bucket()
    ttl = 2
    script = textwrap.dedent(f"""
        import skyward as sky, time
        storage = sky.Storage({s3.endpoint!r}, access_key={s3.access_key!r}, secret_key={s3.secret_key!r},
                              path_style=True)
        provider = sky.SSH(hosts={lab.strings()!r}, key_path={lab.client_key!r}, known_hosts={lab.known_hosts!r})
        pool = sky.Compute(provider=provider, nodes=3, ttl={ttl}, options=sky.Options(console=False, logging=False),
                           volumes=[sky.Volume(bucket={bucket!r}, mount={DATA!r}, storage=storage)])
        pool.open()
        print("OPEN", pool.id, flush=True)
        time.sleep(600)
    """)
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=own_home(tmp_path))
    try:
        line = wait_for_line(client, timeout=240)
        assert line.startswith("OPEN"), f"the client did not open its pool: {line!r}"
        pool_id = line.split()[1]
        assert all(points == [DATA] for points in host_mounts(lab).values()), host_mounts(lab)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        killed = time.monotonic()
        gone = wait_for(lambda: not left_on_hosts(lab, pool_id), timeout=ttl + 20)
        waited = time.monotonic() - killed
        assert gone, (
            f"still on the hosts {waited:.1f}s after the client died: {left_on_hosts(lab, pool_id)}"
        )
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(timeout=10)
    s3.drop_bucket(bucket)
