"""A second, unprivileged account for security tests, and what it throws at a pool.

``stranger()`` makes the account ``skyward-probe`` when missing (the tests run as root)
and yields a ``Probe``: a stdlib-only script it runs as that account (``setpriv``, a bare
environment: nothing of the pool's, such as Ray's token, reaches it), on this machine or
inside a test host's network namespace. ``FRAMINGS`` wrap a pickle the way a server might
read one; ``touching(marker)`` is a pickle whose loading creates ``marker``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import pwd
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PROBE_USER = "skyward-probe"

PROBE = r'''
"""Run as another user: tries what it is asked to on a pool's files and sockets and
prints, as JSON, what each try came to ("ok" or the errno's name)."""
import errno, json, os, socket, sys, time
from concurrent.futures import ThreadPoolExecutor


def attempt(action):
    try:
        action()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, type(error).__name__)


def directory(path):
    name = f".probe-{os.getpid()}"

    def create():
        os.close(os.open(os.path.join(path, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.unlink(os.path.join(path, name))

    def bind():  # relative to the directory: no AF_UNIX path limit
        os.chdir(path)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
                server.bind(name + ".sock")
                os.unlink(name + ".sock")
        finally:
            os.chdir("/")

    def enter():
        os.chdir(path)
        os.chdir("/")

    return {"list": attempt(lambda: os.listdir(path)), "enter": attempt(enter), "create": attempt(create),
            "bind": attempt(bind)}


def unix(path):
    def connect():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.settimeout(5)
            peer.connect("\0" + path[1:] if path.startswith("@") else path)

    return attempt(connect)


def unix_send(path, data, wait):
    return send(socket.AF_UNIX, path, data, wait)


def read(path):
    def first_byte():
        with open(path, "rb") as file:
            file.read(1)

    return attempt(first_byte)


def tcp(host, port, data, wait):
    return send(socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port), data, wait)


def send(family, address, data, wait):
    """Connect to ``address``, send ``data`` (hex; none: connect only) and count the bytes
    answered within ``wait`` seconds."""
    result = {"connected": False, "error": None, "reply": 0}
    with socket.socket(family, socket.SOCK_STREAM) as peer:
        peer.settimeout(5)
        try:
            peer.connect(address)
            result["connected"] = True
            if data:
                peer.sendall(bytes.fromhex(data))
                peer.settimeout(wait)
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and (chunk := peer.recv(65536)):
                    result["reply"] += len(chunk)
        except TimeoutError:
            pass
        except OSError as error:
            result["error"] = errno.errorcode.get(error.errno or 0, type(error).__name__)
    return result


request = json.load(sys.stdin)
if request["op"] == "directories":
    answer = {path: directory(path) for path in request["paths"]}
elif request["op"] == "unix":
    answer = {path: unix(path) for path in request["paths"]}
elif request["op"] == "unix_send":
    answer = unix_send(request["path"], request["data"], request["wait"])
elif request["op"] == "read":
    answer = {path: read(path) for path in request["paths"]}
else:
    with ThreadPoolExecutor(16) as pool:
        answer = list(pool.map(lambda s: tcp(s[0], s[1], s[2], request["wait"]), request["sends"]))
print(json.dumps(answer))
'''


SQUATTER = r'''
"""Run as another user: reads every process's command line (anyone may, in /proc, without
hidepid), binds each port number it finds there before the process that named it does,
and answers every connection as an HTTP/2 server would (a SETTINGS frame and an ACK), so
a gRPC or HTTP client sends its request, headers included. Stops when stdin closes (or
after argv[1] seconds) and prints, as JSON, the ports it saw, those it bound and the
bytes each received (hex). Only command lines holding one of argv[2:] count (the
pool's, not those of other tests running beside it)."""
import json, os, re, select, socket, sys, threading, time

LIMIT = 1 << 20
PORT_ARGUMENT = re.compile(r"port", re.IGNORECASE)
NUMBER = re.compile(r"(?<![\d.])(\d{4,5})(?![\d.])")
ADDRESS_PORT = re.compile(r"[\w\].-]:(\d{4,5})(?!\d)")
SETTINGS = bytes.fromhex("000000040000000000") + bytes.fromhex("000000040100000000")


def ports_of(arguments):
    found = set()
    for index, argument in enumerate(arguments):
        found.update(int(port) for port in ADDRESS_PORT.findall(argument))
        if PORT_ARGUMENT.search(argument):
            found.update(int(port) for port in NUMBER.findall(argument))
            if "=" not in argument and index + 1 < len(arguments):
                found.update(int(port) for port in NUMBER.findall(arguments[index + 1]))
    return {port for port in found if 1024 <= port <= 65535}


def command_lines(wanted):
    own = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == own:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                raw = file.read()
        except OSError:
            continue
        if any(word in raw for word in wanted):
            yield [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def bind(port):
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            if family == socket.AF_INET6:
                server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            server.bind((host, port))
            server.listen(64)
            server.setblocking(False)
            return server
        except OSError:
            server.close()
    return None


seen, bound, received, lock = set(), {}, {}, threading.Lock()
stopped = threading.Event()


def serve():
    peers = {}
    while not stopped.is_set():
        with lock:
            servers = {server: port for port, server in bound.items()}
        readable, _, _ = select.select([*servers, *peers], [], [], 0.01)
        for ready in readable:
            if ready in servers:
                try:
                    peer, _ = ready.accept()
                except OSError:
                    continue
                peer.setblocking(False)
                try:
                    peer.sendall(SETTINGS)
                except OSError:
                    pass
                peers[peer] = servers[ready]
                continue
            try:
                chunk = ready.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                peers.pop(ready).close()
                continue
            with lock:
                data = received.setdefault(peers[ready], bytearray())
                data.extend(chunk[: max(0, LIMIT - len(data))])


server_thread = threading.Thread(target=serve, daemon=True)
server_thread.start()
ended = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), ended.set()), daemon=True).start()
deadline = time.monotonic() + float(sys.argv[1])
print("::watching", flush=True)
while not ended.is_set() and time.monotonic() < deadline:
    for arguments in command_lines([word.encode() for word in sys.argv[2:]]):
        for port in ports_of(arguments) - seen:
            seen.add(port)
            server = bind(port)
            if server is not None:
                with lock:
                    bound[port] = server
    time.sleep(0.002)
time.sleep(0.5)
stopped.set()
server_thread.join(5)
with lock:
    answer = {"seen": sorted(seen), "bound": sorted(bound), "received": {port: data.hex() for port, data in received.items()}}
print(json.dumps(answer), flush=True)
'''


@dataclass
class Squat:
    """What a squatter saw (port numbers on command lines), bound first, and received."""

    seen: list[int] = field(default_factory=list)
    bound: list[int] = field(default_factory=list)
    received: dict[int, bytes] = field(default_factory=dict)

    def holding(self, secret: str) -> dict[int, bytes]:
        """The ports whose received bytes contain ``secret``, with those bytes."""
        return {port: data for port, data in self.received.items() if secret.encode() in data}


@dataclass(frozen=True, slots=True)
class Probe:
    """The probe script and the account and interpreter it runs with."""

    uid: int
    gid: int
    python: str
    script: str

    def run(self, request: dict[str, Any], netns: str | None = None) -> Any:
        """The probe's answer to ``request`` (run in the network namespace ``netns``: a
        test host's)."""
        where = ["ip", "netns", "exec", netns] if netns else []
        done = subprocess.run(
            [*where, *_as(self.uid, self.gid, self.python, self.script)], input=json.dumps(request), capture_output=True,
            text=True, timeout=180, cwd="/", env=_BARE_ENV, check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    @contextlib.contextmanager
    def squatting(self, netns: str | None = None, words: tuple[str, ...] = ("ray",), limit: float = 600.0) -> Iterator[Squat]:
        """The squatter (``SQUATTER``) running as this account (in the network namespace
        ``netns``) for the body of the ``with``, on command lines that hold one of
        ``words``; the yielded ``Squat`` is filled in when it ends."""
        script = os.path.join(os.path.dirname(self.script), "squatter.py")
        if not os.path.exists(script):
            with open(script, "w", encoding="utf-8") as file:
                file.write(SQUATTER)
            os.chmod(script, 0o644)
        where = ["ip", "netns", "exec", netns] if netns else []
        process = subprocess.Popen(
            [*where, *_as(self.uid, self.gid, self.python, script, str(limit), *words)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", env=_BARE_ENV,
        )
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "::watching", process.stderr.read() if process.stderr else ""
        found = Squat()
        try:
            yield found
        finally:
            output, errors = process.communicate("", timeout=60)
            assert process.returncode == 0, errors[-3000:]
            answer = json.loads(output)
            found.seen, found.bound = answer["seen"], answer["bound"]
            found.received = {int(port): bytes.fromhex(data) for port, data in answer["received"].items()}


_BARE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
"""The probe's whole environment: nothing of this process's (the Ray token) reaches it."""


def _as(uid: int, gid: int, python: str, *arguments: str) -> list[str]:
    """The command line that runs ``python -I arguments...`` as ``uid``:``gid``, in no
    other group."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-I", *arguments]


def _runs(uid: int, gid: int, python: str) -> bool:
    """Whether ``uid`` can run ``python`` (it may not reach this venv's)."""
    done = subprocess.run(
        _as(uid, gid, python, "-c", "import os; print(os.getuid())"), capture_output=True, text=True, timeout=30,
        cwd="/", env=_BARE_ENV, check=False,
    )
    return done.returncode == 0 and done.stdout.strip() == str(uid)


@contextlib.contextmanager
def stranger() -> Iterator[Probe]:
    """The ``skyward-probe`` account (created when missing) and a Python it can run (this
    venv's when the account can read it, else the system's: the probe needs the stdlib
    only)."""
    if os.geteuid() != 0:
        pytest.skip("runs as root: it creates an unprivileged account to probe the pool with")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        pytest.skip("needs setpriv and useradd (util-linux, passwd)")
    try:
        account = pwd.getpwnam(PROBE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
            check=True, capture_output=True,
        )
        account = pwd.getpwnam(PROBE_USER)
    home = tempfile.mkdtemp(prefix="skyward-probe-")
    os.chmod(home, 0o755)
    script = os.path.join(home, "probe.py")
    with open(script, "w", encoding="utf-8") as file:
        file.write(PROBE)
    os.chmod(script, 0o644)
    try:
        candidates = (sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3", shutil.which("python3"))
        usable = [
            python for python in dict.fromkeys(candidates) if python and _runs(account.pw_uid, account.pw_gid, python)
        ]
        if not usable:
            pytest.skip(f"no Python interpreter that {PROBE_USER} can run")
        yield Probe(account.pw_uid, account.pw_gid, usable[0], script)
    finally:
        shutil.rmtree(home, ignore_errors=True)


class _Command:
    """Unpickles into running ``command`` in a shell."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Callable[[str], int], tuple[str]]:
        return os.system, (self.command,)


def touching(marker: Path) -> bytes:
    """A pickle whose loading creates ``marker``."""
    return pickle.dumps(_Command(f"touch {shlex.quote(str(marker))}"))


def _http2(data: bytes) -> bytes:
    """A gRPC call on a fresh HTTP/2 connection whose one message is ``data``."""

    def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload

    def header(name: bytes, value: bytes) -> bytes:  # HPACK: literal, not indexed, new name
        return b"\x00" + bytes((len(name),)) + name + bytes((len(value),)) + value

    headers = (
        b"\x83\x86"  # :method POST, :scheme http
        + header(b":path", b"/ray.rpc.CoreWorkerService/PushTask") + header(b":authority", b"127.0.0.1")
        + header(b"content-type", b"application/grpc") + header(b"te", b"trailers")
    )
    message = b"\x00" + len(data).to_bytes(4, "big") + data
    return (
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")  # preface, SETTINGS
        + frame(1, 0x4, 1, headers) + frame(0, 0x1, 1, message)  # HEADERS (END_HEADERS), DATA (END_STREAM)
    )


def _http1(data: bytes) -> bytes:
    head = (
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + data


def _json_line(data: bytes) -> bytes:
    request = {"op": "lease", "count": 1, "keep_warm": 1.0, "pickle": base64.b64encode(data).decode()}
    return json.dumps(request).encode() + b"\n"


FRAMINGS: dict[str, Callable[[bytes], bytes]] = {
    "raw": lambda data: data,
    "len8": lambda data: struct.pack("!Q", len(data)) + data,
    "len4": lambda data: struct.pack("!I", len(data)) + data,
    "len8-tag": lambda data: struct.pack("!Q", len(data) + 1) + b"P" + data,
    "json-line": _json_line,
    "http1": _http1,
    "grpc-h2": _http2,
}


@contextlib.contextmanager
def marks_dir(parent: str | None = None) -> Iterator[Path]:
    """A directory for the markers, that this user's processes (the pool's) can write."""
    directory = Path(tempfile.mkdtemp(prefix="skyward-marks-", dir=parent))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)




def ray_tokens() -> set[str]:
    """Every Ray token in the environment of a live process (read as root): the tokens of
    the pools running now, on this machine and on its test hosts (same process table)."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environment = file.read()
        except OSError:
            continue
        for entry in environment.split(b"\0"):
            if entry.startswith(b"RAY_AUTH_TOKEN=") and len(entry) > len(b"RAY_AUTH_TOKEN="):
                found.add(entry.split(b"=", 1)[1].decode(errors="replace"))
    return found


def assert_nothing_leaked(squat: Squat, tokens: set[str]) -> None:
    """No byte a squatter received holds one of ``tokens`` or an authorization header."""
    assert tokens, "no Ray token was found: the test would prove nothing"
    assert squat.seen, "the squatter found no port on a Ray command line: it was not watching"
    leaks = {port: data[:300] for token in tokens for port, data in squat.holding(token).items()}
    assert leaks == {}, f"{PROBE_USER} squatted ports {sorted(leaks)} and received the pool's Ray token"
    headers = {port: data[:300] for port, data in squat.received.items() if b"authorization" in data.lower()}
    assert headers == {}, f"{PROBE_USER} received an authorization header on ports {sorted(headers)}"


def on_command_lines(secrets: set[str]) -> list[str]:
    """The command lines of live processes that hold one of ``secrets`` (anyone can read
    them, in /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                line = file.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(secret in line for secret in secrets):
            found.append(line[:200])
    return found
