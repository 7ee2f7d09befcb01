"""The cluster's ports refuse unauthenticated peers: Ray's GCS asks for the pool's token,
every other TCP port Ray listens on across the hosts refuses a peer without it, the node
agents' TCP lanes and the head relay's upload lane hang up on a peer that cannot prove
the relay's secret, and the head agent listens on node 0's loopback only (reachable through SSH alone). On the hosts, the
pool's directory and the skyward cache are the user's alone (mode 0700).
This test runs from the client machine, which is another host on the lab's network."""

from __future__ import annotations

import asyncio
import glob
import os
import socket
import ssl
import stat
import subprocess
import sys

import pytest
from hosts import HostLab

import skyward as sky
from skyward.model.nodes import NodeHandle
from skyward.providers.ssh.cluster import RemoteHosts
from skyward.providers.ssh.connection import KnownHosts, RemoteFiles, SSHReach, connect, parse_host

pytestmark = pytest.mark.slow


def _listeners(lab: HostLab, loopback: bool) -> list[int]:
    table = lab.hosts[0].exec("cat", "/proc/net/tcp").stdout.splitlines()[1:]
    ports = []
    for row in table:
        local, state = row.split()[1], row.split()[3]
        address, port = local.split(":")
        if state == "0A" and (address == "0100007F") == loopback:
            ports.append(int(port, 16))
    return ports


def test_gcs_refuses_a_peer_without_the_token(ssh_pool: sky.Pool) -> None:
    info = ssh_pool._open.cluster.infos[0]  # type: ignore[union-attr]
    intruder = f"import ray; ray.init(address='{info.head_addr}:{info.head_port}', log_to_driver=False)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    result = subprocess.run(
        [sys.executable, "-c", intruder], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "Unauthenticated" in result.stderr or "InvalidAuthToken" in result.stderr, result.stderr[-2000:]


def test_head_agent_is_not_reachable_from_another_host(ssh_pool: sky.Pool, lab: HostLab) -> None:
    # A port number that another process also listens on at another address (Ray's gRPC
    # servers set SO_REUSEPORT) is that process's to answer: CI once met one.
    loopback_only = sorted(set(_listeners(lab, loopback=True)) - set(_listeners(lab, loopback=False)))
    assert loopback_only, "the head agent should listen on node 0's loopback"
    for port in loopback_only:
        with pytest.raises(OSError):
            socket.create_connection((lab.hosts[0].address, port), timeout=3).close()
    assert (sky.function(lambda: 1)() >> ssh_pool) == 1  # while the client, through SSH, gets in


# Candidate read-only methods, one per service Ray serves over gRPC; an empty request is
# a valid (all-default) message. A port that answers UNAUTHENTICATED (16) to a method it
# serves refuses unauthenticated peers; UNIMPLEMENTED (12) means "not this service".
GRPC_METHODS = (
    "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
    "/ray.rpc.NodeManagerService/GetSystemConfig",
    "/ray.rpc.CoreWorkerService/NumPendingTasks",
    "/ray.rpc.ObjectManagerService/FreeObjects",
    "/ray.rpc.ObjectManagerService/Pull",
    "/ray.rpc.ReporterService/GetTraceback",
    "/ray.rpc.LogService/ListLogs",
)
UNAUTHENTICATED, UNIMPLEMENTED = "16", "12"


def _tcp_listeners(lab: HostLab) -> list[tuple[int, str, int, str]]:
    """(host index, address, port, process) of every TCP port listening on a host's
    own address (not loopback), sshd excepted."""
    found = []
    for index, host in enumerate(lab.hosts):
        for line in host.exec("ss", "-ltnpH").stdout.splitlines():
            fields = line.split()
            local = fields[3]
            address, port = local.rsplit(":", 1)
            process = fields[5].split('"')[1] if len(fields) > 5 and '"' in fields[5] else "?"
            if address.startswith("127.") or address in ("[::1]",) or process == "sshd":
                continue
            found.append((index, host.address, int(port), process))
    return found


def _probe(address: str, port: int) -> str:
    """How the port treats a peer without the token: "refused", "open (...)" or "unknown".
    The runtime-env agent's port answers once the stand-in there has started Ray's agent
    for the probe (seconds on busy shared cores), hence the HTTP probe's long limit."""
    http = subprocess.run(
        ["curl", "-s", "-m", "20", "-o", "/dev/null", "-w", "%{http_code}", f"http://{address}:{port}/"],
        capture_output=True, text=True, timeout=30,
    ).stdout.strip()
    if http not in ("", "000"):
        return "refused" if http in ("401", "403") else f"open (HTTP {http} at /)"
    frame = b"\x00\x00\x00\x00\x00"  # an uncompressed, empty gRPC message
    seen = []
    for method in GRPC_METHODS:
        result = subprocess.run(
            ["curl", "-s", "-m", "5", "--http2-prior-knowledge", "-X", "POST", "-D", "-", "-o", "/dev/null",
             "-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", "@-",
             f"http://{address}:{port}{method}"],
            input=frame, capture_output=True, timeout=15,
        )
        headers = result.stdout.decode(errors="replace").lower()
        status = next((h.split(":", 1)[1].strip() for h in headers.splitlines() if h.startswith("grpc-status:")), None)
        if status == UNAUTHENTICATED:
            return "refused"
        if status is not None and status != UNIMPLEMENTED:
            return f"open (gRPC status {status} for {method})"
        seen.append(f"{method.rsplit('/', 1)[1]}={status or result.returncode}")
    return f"unknown (HTTP {http or '-'}; {', '.join(seen)})"


def _upload_lane(address: str, port: int) -> str | None:
    """How the head relay's upload lane (``upload_lane``) treats a peer without the
    secret, when that is what listens there (it speaks TLS with the relay's certificate;
    else None): after the relay's challenge, a wrong proof and then an upload must get the
    connection closed, never "stored"."""
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE  # the stranger trusts anything
    try:
        with socket.create_connection((address, port), timeout=5) as raw, tls.wrap_socket(raw) as peer:
            certificate = peer.getpeercert(binary_form=True) or b""
            if b"skyward head relay" not in certificate:
                return None
            peer.sendall(os.urandom(16))
            challenge = b""
            while len(challenge) < 48 and (chunk := peer.recv(48 - len(challenge))):
                challenge += chunk
            try:
                peer.sendall(os.urandom(32) + b"\0" * 16 + (1).to_bytes(4, "big") + (4).to_bytes(8, "big") + b"evil")
                answer = peer.recv(4096)
            except (ConnectionResetError, ssl.SSLError):
                answer = b""
    except (OSError, ssl.SSLError):
        return None
    return "refused" if len(challenge) == 48 and not answer else f"open ({len(challenge)} + {answer[:40]!r})"


def _lane_ports(lab: HostLab) -> set[tuple[int, int]]:
    """(host index, port) of every node agent's TCP lane (each keeps its port beside the
    pool's notes, in the host's own /tmp)."""
    found = set()
    for index, host in enumerate(lab.hosts):
        for path in glob.glob(os.path.join(host.private("/tmp"), "skyward-*-n*", "notes", "lane-*.port")):
            with open(path) as file:
                found.add((index, int(file.read())))
    return found


def _probe_lane(address: str, port: int) -> str:
    """How a lane treats a peer without the secret: after the agent's challenge, a wrong
    answer and then a request frame must get the connection closed, never a reply."""
    with socket.create_connection((address, port), timeout=5) as peer:
        peer.sendall(os.urandom(16))
        challenge = b""
        while len(challenge) < 48 and (chunk := peer.recv(48 - len(challenge))):
            challenge += chunk
        try:
            peer.sendall(b"\0" * 32 + (9).to_bytes(8, "big") + b"\0request")
            answer = peer.recv(4096)
        except ConnectionResetError:
            answer = b""
    return "refused" if len(challenge) == 48 and not answer else f"open ({len(challenge)} + {answer[:40]!r})"


def test_every_ray_port_refuses_a_peer_without_the_token(ssh_pool: sky.Pool, lab: HostLab) -> None:
    """Every TCP port the pool listens on, on every host (Ray's GCS, raylets, object
    managers, runtime-env agents, and the core-worker port of every actor and worker:
    node agents, the collection hosts, the head agent's driver; the agents' lanes; the
    head relay's upload lane),
    probed from the client (another host of the lab network) with no token: each must
    refuse (gRPC UNAUTHENTICATED, HTTP 401/403; a lane hangs up). The table is printed
    with -s."""
    assert (sky.function(lambda: 1)() >> ssh_pool) == 1  # the pool is up and has workers
    assert ssh_pool.counter("ports-probe", consistency="strong").increment() >= 1  # collection hosts up
    listeners = _tcp_listeners(lab)
    assert listeners, "no Ray port found on the hosts"
    lanes = _lane_ports(lab)
    assert len(lanes) == 2, lanes  # the agents of nodes 1 and 2 (node 0's lane is a Unix socket)
    uploads = {(index, port): _upload_lane(address, port) for index, address, port, _ in listeners if index == 0}
    uploads = {where: verdict for where, verdict in uploads.items() if verdict is not None}
    assert len(uploads) == 1, uploads  # the head relay's upload lane, on node 0
    report = [
        (index, port, process, uploads.get((index, port))
         or (_probe_lane(address, port) if (index, port) in lanes else _probe(address, port)))
        for index, address, port, process in listeners
    ]
    assert lanes <= {(index, port) for index, port, *_ in report}, report
    table = "\n".join(f"node {i} port {p} {proc}: {verdict}" for i, p, proc, verdict in report)
    print(table)
    assert {process for *_, process, _ in report} >= {"gcs_server", "raylet"}, table
    assert all(verdict == "refused" for *_, verdict in report), table


def test_the_pool_directory_and_the_cache_are_private_to_the_user(ssh_pool: sky.Pool, lab: HostLab) -> None:
    """While the pool is open, its directory on every host (the shell_vars values, its logs
    and notes, Ray's own 0777 directories) and the user's skyward cache there (the
    includes: the user's code) are mode 0700: no other user of the host may list or
    enter them."""
    assert (sky.function(lambda: 1)() >> ssh_pool) == 1
    marker = f"skyward-{ssh_pool.id[:12]}-n"
    modes = {}
    for host in lab.hosts:
        tmp = host.private("/tmp")
        found = [os.path.join(tmp, name) for name in os.listdir(tmp) if name.startswith(marker)]
        assert len(found) == 1, (host.name, os.listdir(tmp))
        for path in (found[0], os.path.join(host.private("/root/.cache"), "skyward")):
            modes[f"{host.name}:{path}"] = oct(stat.S_IMODE(os.stat(path).st_mode))
    assert set(modes.values()) == {"0o700"}, modes


def test_a_private_directory_that_is_a_link_or_another_users_is_refused(lab: HostLab) -> None:
    """``make_private_dirs`` (the pool directory, the cache) creates a directory 0700,
    makes one of the user's own 0700, and refuses a link or another user's directory (made
    first by someone else to read what the pool puts there); a pool's own directory it
    refuses when it exists at all. Asked for both at once, as a pool's open does, it makes
    neither past the first it refuses."""
    host = lab.hosts[0]
    tmp = host.private("/tmp")
    os.makedirs(os.path.join(tmp, "sky-mine"), mode=0o755)
    os.makedirs(os.path.join(tmp, "sky-theirs"))
    os.chown(os.path.join(tmp, "sky-theirs"), 65534, 65534)
    os.symlink("/tmp/sky-mine", os.path.join(tmp, "sky-link"))
    endpoint = parse_host(lab.strings()[0], "root", 22, lab.client_key)

    async def attempt(path: str, new: bool = False, first: tuple[str, ...] = ()) -> str:
        conn = await connect(endpoint, KnownHosts(lab.known_hosts), 10)
        try:
            await RemoteFiles(conn, endpoint).make_private_dirs([*first, *(() if new else (path,))], [path] if new else [])
            return oct(stat.S_IMODE(os.stat(os.path.join(tmp, path.removeprefix("/tmp/"))).st_mode))
        except OSError as exc:
            return str(exc)
        finally:
            conn.close()

    assert asyncio.run(attempt("/tmp/sky-new/deeper")) == "0o700"
    assert asyncio.run(attempt("/tmp/sky-mine")) == "0o700"
    for path in ("/tmp/sky-theirs", "/tmp/sky-link"):
        assert f"{path} must be a directory of this user's own, mode 0700, and is not" in asyncio.run(attempt(path))
    # a pool's own directory (``new``) is made by that pool, never found: not even one of the user's
    assert asyncio.run(attempt("/tmp/sky-fresh", new=True)) == "0o700"
    for path in ("/tmp/sky-fresh", "/tmp/sky-mine", "/tmp/sky-link"):
        said = asyncio.run(attempt(path, new=True))
        assert f"making the directories {path} failed" in said and f"{path} exists already on this host" in said, said
    assert asyncio.run(attempt("/tmp/sky-pool", new=True, first=("/tmp/sky-cache",))) == "0o700"
    assert oct(stat.S_IMODE(os.stat(os.path.join(tmp, "sky-cache")).st_mode)) == "0o700"
    said = asyncio.run(attempt("/tmp/sky-next", new=True, first=("/tmp/sky-link",)))
    assert "/tmp/sky-link must be a directory of this user's own" in said, said
    assert not os.path.exists(os.path.join(tmp, "sky-next")), "made after the step before it failed"

    async def then(script: str, paths: tuple[str, ...], args: tuple[str, ...] = ()) -> str:
        conn = await connect(endpoint, KnownHosts(lab.known_hosts), 10)
        try:
            return await RemoteFiles(conn, endpoint).make_private_dirs(paths, then=script, args=args, timeout=10)
        except OSError as exc:
            return str(exc)
        finally:
            conn.close()

    # the script after the directories (the facts, in an open) runs in the same command,
    # with its arguments as given, and only once every directory is made
    assert asyncio.run(then('echo "$#:$1"; test -d /tmp/sky-then', ("/tmp/sky-then",), ("a b",))) == "1:a b\n"
    assert "exit 3" in asyncio.run(then("echo said >&2; exit 3", ("/tmp/sky-then",)))
    assert "/tmp/sky-link must be" in asyncio.run(then("touch /tmp/sky-ran", ("/tmp/sky-link",)))
    assert not os.path.exists(os.path.join(tmp, "sky-ran")), "the script ran after a directory was refused"


def test_a_pool_directory_found_on_a_host_is_refused_and_left_as_it_was(lab: HostLab) -> None:
    """An open that finds its pool's directory on a host already (another pool's, or one
    made to catch what the pool puts there) fails there and, stopping, removes nothing of
    it: a node whose open failed before its watchdog started loses only the directory the
    pool made itself."""
    host = lab.hosts[0]
    hosts = RemoteHosts("feedfacecafe0001", 60, lambda *_: None)
    found = os.path.join(host.private("/tmp"), hosts.pool_dir(0).removeprefix("/tmp/"))
    os.makedirs(found, mode=0o700)
    with open(os.path.join(found, "theirs.txt"), "w") as kept:
        kept.write("not the pool's")
    endpoint = parse_host(lab.strings()[0], "root", 22, lab.client_key)
    handle = NodeHandle(id="h0", address=host.address, ssh=endpoint)

    async def open_and_stop() -> str:
        await hosts.connect([handle], SSHReach(KnownHosts(lab.known_hosts), 10))
        try:
            await hosts.gather_facts([], 10)  # where an open makes the pool's directory
        except OSError as exc:
            return str(exc)
        finally:
            await hosts.stop()
        return "opened"

    said = asyncio.run(open_and_stop())
    assert f"{hosts.pool_dir(0)} exists already on this host" in said, said
    assert f"failed on {endpoint}" in said, said
    assert sorted(os.listdir(found)) == ["theirs.txt"]

    hosts = RemoteHosts("cafefeedface0002", 60, lambda *_: None)  # a pool that made its own
    made = os.path.join(host.private("/tmp"), hosts.pool_dir(0).removeprefix("/tmp/"))

    async def made_then_stopped() -> str:
        await hosts.connect([handle], SSHReach(KnownHosts(lab.known_hosts), 10))
        try:
            await hosts.gather_facts([], 10)
            return oct(stat.S_IMODE(os.stat(made).st_mode))
        finally:
            await hosts.stop()

    assert asyncio.run(made_then_stopped()) == "0o700"
    assert not os.path.exists(made), "the directory the pool made outlived its failed open"


def test_the_client_prefers_aes_gcm_and_reaches_a_host_without_it(lab: HostLab) -> None:
    """A pool's SSH connection runs AES-GCM both ways where the host offers it (an AEAD
    cipher, several times cheaper in asyncssh than ChaCha20-Poly1305: R-broadcast in
    docs/benchmarks.md), and still connects to an sshd that allows ChaCha20-Poly1305 only."""

    async def ciphers(hosts: HostLab) -> tuple[str, str]:
        endpoint = parse_host(hosts.strings()[0], "root", 22, hosts.client_key)
        conn = await connect(endpoint, KnownHosts(hosts.known_hosts), 10)
        try:
            assert (await conn.run("echo hello", check=True)).stdout == "hello\n"
            return conn.get_extra_info("send_cipher"), conn.get_extra_info("recv_cipher")
        finally:
            conn.close()

    assert asyncio.run(ciphers(lab)) == ("aes256-gcm@openssh.com", "aes256-gcm@openssh.com")
    with HostLab.start(1, sshd_lines=("Ciphers chacha20-poly1305@openssh.com",)) as chacha_only:
        assert asyncio.run(ciphers(chacha_only)) == ("chacha20-poly1305@openssh.com", "chacha20-poly1305@openssh.com")
