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
from dataclasses import dataclass
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


def read(path):
    def first_byte():
        with open(path, "rb") as file:
            file.read(1)

    return attempt(first_byte)


def tcp(host, port, data, wait):
    result = {"connected": False, "error": None, "reply": 0}
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as peer:
        peer.settimeout(5)
        try:
            peer.connect((host, port))
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
elif request["op"] == "read":
    answer = {path: read(path) for path in request["paths"]}
else:
    with ThreadPoolExecutor(16) as pool:
        answer = list(pool.map(lambda s: tcp(s[0], s[1], s[2], request["wait"]), request["sends"]))
print(json.dumps(answer))
'''


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


