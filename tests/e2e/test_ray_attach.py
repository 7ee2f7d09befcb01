"""``sky.Ray(address=...)`` against a real Ray cluster started by ``ray start``.

The cluster (a head with 2 CPUs and a second node, token auth) runs in its own temp dir
and HOME; every process it starts carries a marker environment variable, and only those
processes are stopped at the end (``ray stop`` would stop every Ray on the machine).
Clients run in subprocesses: a process holds one Ray, and this pytest process may hold
the local pools' Ray.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest

import skyward as sky

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
RAY = os.path.join(os.path.dirname(sys.executable), "ray")
MARKER = "SKYWARD_TEST_RAY_CLUSTER"
TOKEN = uuid.uuid4().hex + uuid.uuid4().hex

PRELUDE = """
import os, sys, time
import skyward as sky

ADDRESS = os.environ["TEST_RAY_ADDRESS"]
TOKEN = os.environ["TEST_RAY_TOKEN"]
OPTIONS = sky.Options(console=False, logging=False)

@sky.function
def where(x):
    info = sky.instance_info()
    return (x, info.node, info.total_nodes, os.getpid())

def connect_ray():  # this process's own ray.init to the test cluster, with its token
    import ray
    from skyward.providers.ray.attach import _reset_auth
    os.environ["RAY_AUTH_MODE"], os.environ["RAY_AUTH_TOKEN"] = "token", TOKEN
    _reset_auth()  # Ray read the auth mode when imported
    ray.init(address=ADDRESS, logging_level="ERROR")
    return ray
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked(value: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == value:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stop_marked(value: str) -> None:
    """Stop exactly the processes of our cluster (SIGTERM, then SIGKILL)."""
    processes = marked(value)
    for process in processes:
        try:
            process.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=5)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    base = tempfile.mkdtemp(prefix="skr", dir="/tmp")
    home, tmp = os.path.join(base, "h"), os.path.join(base, "t")
    os.makedirs(home)
    os.makedirs(tmp)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    client_env = {**clean, "HOME": home, "TMPDIR": tmp, "PYTHONUNBUFFERED": "1"}
    ray_env = {
        **client_env, MARKER: base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN,
        "RAY_USAGE_STATS_ENABLED": "0", "SPT_NOENV": "1",  # Ray's agents then keep the marker readable
    }
    port = free_port()
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        head = [
            RAY, "start", "--head", f"--port={port}", f"--temp-dir={base}/r", "--num-cpus=2",
            "--include-dashboard=false", *common,
        ]
        subprocess.run(head, env=ray_env, check=True, capture_output=True, timeout=120)
        second = [RAY, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", *common]
        subprocess.run(second, env=ray_env, check=True, capture_output=True, timeout=120)
        env = {**client_env, "TEST_RAY_ADDRESS": f"127.0.0.1:{port}", "TEST_RAY_TOKEN": TOKEN}
        yield {"base": base, "address": f"127.0.0.1:{port}", "env": env}  # type: ignore[misc]
    finally:
        stop_marked(base)
        shutil.rmtree(base, ignore_errors=True)


def run(env: dict[str, str], body: str, timeout: float = 180) -> str:
    source = PRELUDE + textwrap.dedent(body)
    result = subprocess.run(
        [sys.executable, "-c", source], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def test_attach_dispatch_subset_and_cluster_survives(cluster: dict) -> None:
    body = """
    with sky.Compute(provider=sky.Ray(address=ADDRESS, token=TOKEN), options=OPTIONS) as pool:
        assert pool.current_nodes() == 2
        x, node, total, _ = where(1) >> pool
        assert (x, total) == (1, 2)
        everywhere = where(2) @ pool
        assert [r[1] for r in everywhere] == [0, 1] and len({r[3] for r in everywhere}) == 2
        assert pool.map(lambda v: v * 2, range(50)) == [v * 2 for v in range(50)]
        collections = pool._open.cluster.collections.config
    print("FIRST OK", flush=True)

    # a second pool attaches again, to a subset of the nodes
    with sky.Compute(provider=sky.Ray(address=ADDRESS, nodes=1, token=TOKEN), options=OPTIONS) as pool:
        assert [r[1:3] for r in where(3) @ pool] == [(0, 1)]
    print("SUBSET OK", flush=True)

    try:
        with sky.Compute(provider=sky.Ray(address=ADDRESS, nodes=5, token=TOKEN), options=OPTIONS):
            pass
    except ValueError as exc:
        assert "Ray.nodes=5" in str(exc) and "2 alive node" in str(exc), exc
        print("TOO MANY OK", flush=True)

    # nothing of ours is left on the cluster, which still runs
    ray = connect_ray()
    # a process of the first pool that uses a collection for the first time only after the
    # pool closed (a task still running as it closes) finds its collections gone, and
    # starts no actor of its own on the cluster
    from skyward.collections.local_operations import LocalOperations
    late = LocalOperations(collections, "late")
    try:
        late.hosts_handle()
    except sky.CollectionUnavailableError as exc:
        assert "is gone" in str(exc), exc
        print("LATE REFUSED", flush=True)
    finally:
        late.close()
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    assert not [n for n in names if n.startswith("skyward")], names
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    ray.shutdown()
    print("CLEAN OK", flush=True)
    """
    output = run(cluster["env"], body)
    for mark in ("FIRST OK", "SUBSET OK", "TOO MANY OK", "LATE REFUSED", "CLEAN OK"):
        assert mark in output, output
    assert marked(cluster["base"]), "the cluster must still run after the pools closed"


def test_a_client_that_dies_leaves_none_of_its_actors_on_the_cluster(cluster: dict) -> None:
    """Killed with its pool open (its collections in use), the client leaves neither its
    agents nor the actor holding the pool's collections: none of them is detached."""
    body = """
    with sky.Compute(provider=sky.Ray(address=ADDRESS, token=TOKEN), options=OPTIONS) as pool:
        pool.counter("alive", consistency="strong").increment()
        assert [r[0] for r in where(1) @ pool] == [1, 1]
        print("OPEN", flush=True)
        time.sleep(300)
    """
    client = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)], cwd=ROOT, env=cluster["env"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert client.stdout is not None
        lines = []
        for line in client.stdout:
            lines.append(line)
            if line.strip() == "OPEN":
                break
        assert lines and lines[-1].strip() == "OPEN", "".join(lines)
    finally:
        client.kill()
        client.wait(timeout=30)
    checker = """
    ray = connect_ray()
    deadline = time.monotonic() + 60
    while True:
        ours = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("skyward")]
        if not ours:
            break
        assert time.monotonic() < deadline, ours
        time.sleep(0.5)
    ray.shutdown()
    print("NONE LEFT", flush=True)
    """
    assert "NONE LEFT" in run(cluster["env"], checker)
    assert marked(cluster["base"]), "the cluster must still run"


def test_token_from_environment_and_one_ray_per_process(cluster: dict) -> None:
    body = """
    os.environ["RAY_AUTH_TOKEN"] = TOKEN
    with sky.Compute(provider=sky.Ray(address=ADDRESS), options=OPTIONS) as pool:
        assert [r[0] for r in where(7) @ pool] == [7, 7]
        try:
            with sky.Compute(nodes=1, options=OPTIONS):
                pass
        except RuntimeError as exc:
            assert "one Ray connection" in str(exc) and "sky.Ray()" in str(exc), exc
            print("LOCAL REFUSED", flush=True)
        assert where(8) >> pool
    del os.environ["RAY_AUTH_TOKEN"]
    with sky.Compute(nodes=1, options=OPTIONS) as local:
        assert where(9) >> local
        try:
            with sky.Compute(provider=sky.Ray(address=ADDRESS, token=TOKEN), options=OPTIONS):
                pass
        except RuntimeError as exc:
            assert "sky.Local() pool is open" in str(exc), exc
            print("ATTACH REFUSED", flush=True)
    # after the local pool (and its own token) the cluster can be attached again
    with sky.Compute(provider=sky.Ray(address=ADDRESS, token=TOKEN), options=OPTIONS) as pool:
        assert len(where(10) @ pool) == 2
    print("AGAIN OK", flush=True)

    # the user's own ray.init: used as it is and left connected; another address is refused
    ray = connect_ray()
    with sky.Compute(provider=sky.Ray(address=ADDRESS), options=OPTIONS) as pool:
        assert len(where(11) @ pool) == 2
    assert ray.is_initialized()
    try:
        with sky.Compute(provider=sky.Ray(address="127.0.0.1:1"), options=OPTIONS):
            pass
    except RuntimeError as exc:
        assert "already initialised" in str(exc) and "ray.shutdown()" in str(exc), exc
        print("FOREIGN REFUSED", flush=True)
    ray.shutdown()
    """
    output = run(cluster["env"], body)
    for mark in ("LOCAL REFUSED", "ATTACH REFUSED", "AGAIN OK", "FOREIGN REFUSED"):
        assert mark in output, output


def test_an_elastic_pool_grows_and_shrinks_over_the_cluster_nodes(cluster: dict) -> None:
    body = """
    fast = OPTIONS.with_(reconcile_tick_interval=0.2, autoscale_cooldown=0.5, autoscale_idle_timeout=1.5)

    def eventually(check, what):
        deadline = time.monotonic() + 60
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    @sky.function
    def nap(x):
        time.sleep(0.1)
        return sky.instance_info().node

    with sky.Compute(provider=sky.Ray(address=ADDRESS, token=TOKEN), nodes=(1, 2), options=fast) as pool:
        assert pool.current_nodes() == 1
        pool.counter("kept", consistency="strong").increment()
        futures = [nap(i) > pool for i in range(40)]
        eventually(lambda: pool.current_nodes() == 2, "growing to the second cluster node")
        assert {f.result(60) for f in futures} == {0, 1}
        assert sorted(r[1:3] for r in where(1) @ pool) == [(0, 2), (1, 2)]
        eventually(lambda: pool.current_nodes() == 1, "shrinking once idle")
        assert pool.counter("kept", consistency="strong").value == 1, "collections live on the head"
    print("ELASTIC OK", flush=True)
    """
    assert "ELASTIC OK" in run(cluster["env"], body)


def test_missing_token_says_how_to_give_it(cluster: dict) -> None:
    body = """
    try:
        with sky.Compute(provider=sky.Ray(address=ADDRESS), options=OPTIONS):
            pass
    except ConnectionError as exc:
        assert "sky.Ray(token=...)" in str(exc) and "RAY_AUTH_TOKEN" in str(exc), exc
        print("TOKEN HINT OK", flush=True)
    """
    assert "TOKEN HINT OK" in run(cluster["env"], body)


def test_unreachable_address_fails_fast_and_clearly() -> None:
    base = tempfile.mkdtemp(prefix="skr", dir="/tmp")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "HOME": base, "TMPDIR": base,
        "TEST_RAY_ADDRESS": f"127.0.0.1:{free_port()}", "TEST_RAY_TOKEN": "",
    }
    body = """
    import socket
    silent = socket.socket()  # accepts TCP (the kernel's backlog) but never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    for address in (ADDRESS, "127.0.0.1:%d" % silent.getsockname()[1]):
        started = time.monotonic()
        try:
            with sky.Compute(provider=sky.Ray(address=address), options=sky.Options(console=False, logging=False, provision_timeout=3)):
                pass
        except (ConnectionError, TimeoutError) as exc:  # refused, or silent
            took = time.monotonic() - started
            assert str(exc).startswith(f"Ray.address='{address}'"), exc
            assert "not reachable" in str(exc) or (address != ADDRESS and "more than 3s" in str(exc)), exc
            assert took < 10, took
            print("UNREACHABLE OK", address, flush=True)
    """
    started = time.monotonic()
    try:
        output = run(env, body, timeout=60)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert output.count("UNREACHABLE OK") == 2, output
    assert time.monotonic() - started < 30, "a connection given up on must not hold the client's exit"


def test_address_is_validated_when_constructed(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"Ray.address='ray://head:10001'.*deprecated.*6379"):
        sky.Ray(address="ray://head:10001")
    with pytest.raises(ValueError, match=r"Ray.nodes=0"):
        sky.Ray(address="head:6379", nodes=0)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ValueError, match=r"Ray.address=None.*RAY_ADDRESS"):
        sky.Ray().validate(sky.Spec(provider=sky.Ray()), sky.Options())
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    with pytest.raises(ValueError, match=r"ray://"):
        sky.Ray().resolved_address()
    with pytest.raises(ValueError, match=r"Spec.accelerator"):
        provider = sky.Ray(address="head:6379")
        provider.validate(sky.Spec(provider=provider, accelerator=sky.accelerators.A100()), sky.Options())
    assert sky.Ray(address="head").resolved_address() == ("head", 6379)
    assert "token" not in repr(sky.Ray(address="head:1", token="secret"))
