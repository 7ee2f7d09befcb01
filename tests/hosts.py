"""Throwaway SSH test hosts: one network namespace per host, joined by a bridge, each
running its own sshd inside a private mount namespace (fresh /tmp, /root/.cache,
/root/.skyward and /dev/shm), so hosts share the machine's read-only software (the
Python interpreters) but no installs, temp files or caches.

``HostLab.start(n)`` builds them; ``close()`` kills every process left in the
namespaces, deletes the namespaces and the bridge, and removes the files. A lab whose
process died without closing it (killed mid-run) is taken away the same way by the next
``HostLab.start`` on the machine: each lab's directory names the process that owns it
(``OWNER``). Only the namespaces' own addresses are used. Variants:

- ``shared_home=True``: every host binds the same lab directories at /root/.cache and
  /root/.skyward, like machines with NFS home directories (/tmp stays per host);
- ``no_sftp_hosts=(i, ...)``: those hosts' sshd has no SFTP subsystem;
- ``sshd_lines=("Ciphers ...", ...)``: lines added to every host's sshd_config.

Cloud emulation (tests/cloud) adds hosts one at a time at the addresses a fake cloud gave
its instances (``add``), each accepting that instance's key pair and, as a cloud machine,
able to "shut down": its ``shutdown``/``systemctl`` are replaced (in its own mount
namespace only) by a stub that records the request in the host's /tmp (``halted``)
instead of touching this machine; ``remove`` takes one host away.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import asyncssh

PRIVATE_DIRS = ("/root/.cache", "/root/.skyward", "/tmp")
HOME_DIRS = ("/root/.cache", "/root/.skyward")
"""What ``shared_home`` shares between the hosts."""
HALT_RECORD = ".skyward-test-shutdown"
MACHINE_STUB = f"""#!/bin/sh
# A test host's stand-in for shutdown/systemctl: record, never act on this machine.
echo "$*" >> /tmp/{HALT_RECORD}
"""
START_TIMEOUT = 15.0
CLOSE_TIMEOUT = 15.0
LAB_DIR = "/var/tmp"  # not under /tmp, which each host replaces
OWNER = "owner"
"""A lab directory's file naming its process: its pid and its start time (``_started``)."""


def available() -> str | None:
    """None when test hosts can be made here; else the reason they cannot."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not os.path.exists("/usr/sbin/sshd"):
        return "openssh-server is not installed (scripts/system_deps.sh)"
    return None


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


@dataclass
class TestHost:
    """One host: its namespace, address, sshd process and private directories."""

    name: str
    address: str
    root: str
    sshd: subprocess.Popen[bytes] | None = None
    shared: str | None = None
    """The lab directory holding the home directories all hosts share, if they do."""
    sftp: bool = True
    machine: bool = False
    """A cloud machine: its shutdown is recorded, not performed (see ``halted``)."""

    @property
    def netns(self) -> str:
        return self.name

    def halted(self) -> list[str]:
        """The shutdown requests the host made (arguments of each), for a cloud machine."""
        try:
            with open(os.path.join(self.private("/tmp"), HALT_RECORD)) as f:
                return [line.strip() for line in f if line.strip()]
        except OSError:
            return []

    def private(self, path: str) -> str:
        """Where the host's ``path`` (one of PRIVATE_DIRS) lives on this machine: its own
        directory, or the lab's shared one for a shared home."""
        base = self.shared if self.shared is not None and path in HOME_DIRS else self.root
        return os.path.join(base, path.strip("/").replace("/", "_"))

    def exec(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a command inside the host's network namespace (not its mount namespace)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, *command],
            capture_output=True, text=True, timeout=timeout,
        )

    def pids(self) -> list[int]:
        """Processes living in the host's network namespace."""
        return _pids_in(self.netns)


@dataclass
class HostLab:
    """A set of test hosts on one bridge, with a client key they all accept."""

    hosts: list[TestHost]
    bridge: str
    gateway: str
    root: str
    client_key: str
    known_hosts: str
    tag: str = ""
    sshd_lines: tuple[str, ...] = ()
    _closed: bool = field(default=False)
    _added: int = field(default=0)

    @property
    def cidr(self) -> str:
        """The lab's subnet (its hosts and the gateway, this machine's side)."""
        return self.gateway.rsplit(".", 1)[0] + ".0/24"

    @classmethod
    def start(
        cls, count: int, shared_home: bool = False, no_sftp_hosts: tuple[int, ...] = (), sshd_lines: tuple[str, ...] = ()
    ) -> HostLab:
        """``count`` hosts; with ``shared_home`` they share /root/.cache and /root/.skyward;
        the hosts at ``no_sftp_hosts`` (indexes) have no SFTP subsystem; ``sshd_lines`` go
        into every host's sshd_config."""
        if any(not 0 <= i < count for i in no_sftp_hosts):
            raise ValueError(f"no_sftp_hosts={no_sftp_hosts!r}: indexes of {count} hosts are 0..{count - 1}")
        _sweep_orphans()
        tag = secrets.token_hex(3)
        subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
        root = tempfile.mkdtemp(prefix=f"skyhosts-{tag}-", dir=LAB_DIR)
        with open(os.path.join(root, OWNER), "w") as f:
            f.write(f"{os.getpid()} {_started(os.getpid())}")
        key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = os.path.join(root, "client_key")
        key.write_private_key(key_path)
        os.chmod(key_path, 0o600)
        authorized = os.path.join(root, "authorized_keys")
        key.write_public_key(authorized)
        lab = cls([], f"skb{tag}", f"{subnet}.254", root, key_path, os.path.join(root, "known_hosts"), tag, sshd_lines)
        try:
            _run("ip", "link", "add", lab.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{lab.gateway}/24", "dev", lab.bridge)
            _run("ip", "link", "set", lab.bridge, "up")
            shared = os.path.join(root, "shared") if shared_home else None
            for index in range(count):
                lab.hosts.append(lab._add_host(f"{subnet}.{index + 1}", authorized, shared, index not in no_sftp_hosts))
            lab._wait_listening(lab.hosts)
        except BaseException:
            lab.close()
            raise
        return lab

    def add(self, address: str, authorized_key: str) -> TestHost:
        """A cloud machine at ``address`` (in ``cidr``) whose root accepts ``authorized_key``
        (OpenSSH public key text); returns once its sshd listens."""
        index = self._added
        authorized = os.path.join(self.root, f"authorized-{index}")
        with open(authorized, "w") as f:
            f.write(authorized_key.strip() + "\n")
        host = self._add_host(address, authorized, None, True, machine=True)
        self.hosts.append(host)
        self._wait_listening([host])
        return host

    def remove(self, host: TestHost) -> None:
        """Take ``host`` away: kill what runs in it, delete its namespace and files."""
        _kill_all(host)
        _run("ip", "netns", "del", host.netns, check=False)
        shutil.rmtree(host.root, ignore_errors=True)
        if host in self.hosts:
            self.hosts.remove(host)

    def _add_host(
        self, address: str, authorized: str, shared: str | None, sftp: bool, machine: bool = False
    ) -> TestHost:
        index, self._added = self._added, self._added + 1
        root = os.path.join(self.root, f"h{index}")
        host = TestHost(f"sky{self.tag}h{index}", address, root, shared=shared, sftp=sftp, machine=machine)
        self.hosts.append(host)  # so close() cleans it up if this fails half-way
        os.makedirs(host.root)
        for path in PRIVATE_DIRS:
            os.makedirs(host.private(path), exist_ok=True)
            os.makedirs(path, exist_ok=True)
        outer, inner = f"skv{self.tag}{index}", f"skp{self.tag}{index}"
        _run("ip", "netns", "add", host.netns)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _run("ip", "link", "set", outer, "master", self.bridge, "up")
        _run("ip", "link", "set", inner, "netns", host.netns)
        ns = ("ip", "netns", "exec", host.netns)
        _run(*ns, "ip", "addr", "add", f"{host.address}/24", "dev", inner)
        _run(*ns, "ip", "link", "set", inner, "up")
        _run(*ns, "ip", "link", "set", "lo", "up")
        host_key = os.path.join(host.root, "host_key")
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(host_key)
        os.chmod(host_key, 0o600)
        config = os.path.join(host.root, "sshd_config")
        with open(config, "w") as f:
            f.write(_SSHD_CONFIG.format(address=host.address, key=host_key, authorized=authorized))
            if sftp:
                f.write("Subsystem sftp internal-sftp\n")
            f.writelines(f"{line}\n" for line in self.sshd_lines)
        binds = " && ".join(f"mount --bind {host.private(p)} {p}" for p in PRIVATE_DIRS)
        if machine:  # shutdown is a link to systemctl: both become the recording stub
            stub = os.path.join(host.root, "machine-stub")
            with open(stub, "w") as f:
                f.write(MACHINE_STUB)
            os.chmod(stub, 0o755)
            binds += f" && mount --bind {stub} /usr/bin/systemctl"
        script = f"{binds} && mount -t tmpfs -o size=2g tmpfs /dev/shm && exec /usr/sbin/sshd -D -e -f {config}"
        log = open(os.path.join(host.root, "sshd.log"), "wb")
        host.sshd = subprocess.Popen(
            [*ns, "unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        self.hosts.pop()
        return host

    def restart_sshd(self, host: TestHost) -> None:
        """Restart ``host``'s sshd as a service manager does: the listening process is
        stopped (SIGTERM) and a new one started in the same namespaces; the sessions it
        had accepted live on in their own processes. Returns once the new one listens."""
        assert host.sshd is not None
        old = host.sshd.pid
        mounts = os.readlink(f"/proc/{old}/ns/mnt")
        sessions = [pid for pid in host.pids() if pid != old and _mount_namespace(pid) == mounts]
        if not sessions:
            raise RuntimeError(f"{host.name} has no session to find its mount namespace by")
        host.sshd.terminate()
        host.sshd.wait(timeout=10)
        config = os.path.join(host.root, "sshd_config")
        log = open(os.path.join(host.root, "sshd.log"), "ab")
        host.sshd = subprocess.Popen(
            ["nsenter", f"--target={sessions[0]}", "--mount", "--net", "/usr/sbin/sshd", "-D", "-e", "-f", config],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        self._wait_listening([host])

    def _wait_listening(self, hosts: list[TestHost]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        for host in hosts:
            while True:
                result = host.exec("sh", "-c", "cat /proc/net/tcp", timeout=5)
                port22 = f"{_hex_address(host.address)}:0016"
                if port22 in result.stdout.upper():
                    break
                if host.sshd is not None and host.sshd.poll() is not None:
                    with open(os.path.join(host.root, "sshd.log")) as f:
                        raise RuntimeError(f"sshd of {host.name} exited: {f.read()[-2000:]}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"sshd of {host.name} did not listen within {START_TIMEOUT}s")
                time.sleep(0.05)

    def strings(self, user: str = "root") -> list[str]:
        """The hosts as ``user@address:22`` strings."""
        return [f"{user}@{host.address}:22" for host in self.hosts]

    def leftovers(self) -> dict[str, list[int]]:
        """Processes other than sshd still running in each host's namespace."""
        found: dict[str, list[int]] = {}
        for host in self.hosts:
            sshd = host.sshd.pid if host.sshd is not None else -1
            pids = [p for p in host.pids() if p != sshd and _alive(p) and not _is_sshd(p)]
            if pids:
                found[host.name] = pids
        return found

    def processes_naming(self, text: str) -> list[int]:
        """Processes in any host whose command line contains ``text``."""
        found = []
        for host in self.hosts:
            for pid in host.pids():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if text.encode() in f.read() and _alive(pid):
                            found.append(pid)
                except OSError:
                    continue
        return found

    def close(self) -> None:
        """Kill what runs in the namespaces, delete namespaces, links and files."""
        if self._closed:
            return
        self._closed = True
        for host in self.hosts:
            _kill_all(host)
            _run("ip", "netns", "del", host.netns, check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HostLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sweep_orphans() -> None:
    """Take away every lab whose owning process is gone (``OWNER``): kill what runs in its
    namespaces, delete them, its bridge and its files. A lab still being made (no owner
    written yet) or owned by a live process is left alone."""
    namespaces = _run("ip", "netns", "list", check=False).stdout.split()
    for entry in os.listdir(LAB_DIR):
        parts = entry.split("-")
        if len(parts) < 3 or parts[0] != "skyhosts":
            continue
        root = os.path.join(LAB_DIR, entry)
        try:
            with open(os.path.join(root, OWNER)) as f:
                pid, started = f.read().split()
        except (OSError, ValueError):
            continue
        if _started(int(pid)) in (started, "unknown"):
            continue
        tag = parts[1]
        for name in [name for name in namespaces if name.startswith(f"sky{tag}h")]:
            _kill_in(name)
            _run("ip", "netns", "del", name, check=False)
        _run("ip", "link", "del", f"skb{tag}", check=False)
        shutil.rmtree(root, ignore_errors=True)


def _started(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot), "" when there is none, or
    "unknown" when its start cannot be read: with the pid, it names one process even after
    the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[19]
    except FileNotFoundError:
        return ""
    except (OSError, IndexError):  # unreadable here: taken for alive, so its lab is left alone
        return "unknown"


def _kill_all(host: TestHost) -> None:
    """Kill every process in ``host``'s namespace and wait for its sshd."""
    _kill_in(host.netns)
    if host.sshd is not None:
        try:
            host.sshd.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _kill_in(netns: str) -> None:
    """Kill every process in network namespace ``netns`` (bounded; processes may fork
    meanwhile)."""
    deadline = time.monotonic() + CLOSE_TIMEOUT
    while time.monotonic() < deadline:
        pids = [pid for pid in _pids_in(netns) if _alive(pid)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _pids_in(netns: str) -> list[int]:
    out = _run("ip", "netns", "pids", netns, check=False).stdout.split()
    return [int(pid) for pid in out if pid.isdigit()]


def _mount_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _hex_address(address: str) -> str:
    return "".join(f"{int(part):02X}" for part in reversed(address.split(".")))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _is_sshd(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"sshd" in f.read().split(b"\0")[0]
    except OSError:
        return False


_SSHD_CONFIG = """\
ListenAddress {address}:22
HostKey {key}
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
AllowTcpForwarding yes
MaxSessions 50
MaxStartups 50:30:100
"""
