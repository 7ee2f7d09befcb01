"""The watchdog: one small process per remote node, the pool's dead-man switch there.

Started over SSH with the pool directory, by the command that bootstrapped the node
once its script succeeded (``bootstrap.bootstrap``). With ``mount``, the first line of its stdin
carries the pool's volumes (``skyward.storage.pool_volumes.encode``: keys included, so
never on a command line): it mounts them before it reports ``Watching`` (with
``VolumesMounted`` first), or reports ``MountFailed``, cleans up and exits; the mounts
are its children and it owns them. What it reports are messages of ``core.messages``,
one ``codec.marker`` line each. Then the client
writes a line to its stdin every ``HEARTBEAT`` seconds. It stops every process of this
pool on the node (``pool_processes``), removes the pool directory, unmounts the volumes
(``UnmountFailed`` for one that stays mounted) and exits:
- on ``CLOSE`` (the pool closes: every host is told at once) or ``STOP`` (this host
  leaves a pool that goes on), at once;
- when its stdin ends (the client's SSH connection closed: the client exited or was
  killed), ``ttl`` seconds later (``Spec.ttl``; 0: at once);
- when no line arrived for ``max(ttl, 3 * HEARTBEAT)`` seconds (the network is gone).
In ``halt`` mode (machines created for the pool) it is the machine's dead-man switch:
it cancels the shutdown the machine scheduled at boot for a client that never came,
and when the client vanished it shuts the machine down after the cleanup (a cloud then
terminates it). Run as a module, with ``-P`` so that nothing of the login directory's
shadows what it imports:
``python -P -m skyward.providers.ssh.watchdog POOL_DIR TTL HEARTBEAT stay|halt [mount]``.

A client that takes the pool over from one that died (the pool daemon's successor, for
a kept pool) rejoins it before ``ttl`` runs out: ``... watchdog --rejoin`` with the
pool directory as the first line of its stdin connects to the watchdog's Unix socket
(``SOCKET`` in the private pool directory; a peer of another user is refused) and
carries its stdin there and what the watchdog says back, so the new client heartbeats,
stops and hears it exactly as the first one did; the countdown stops while it is there.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

import psutil

from skyward.core import messages
from skyward.core.codec import marker
from skyward.core.unix_listener import listening_at

if TYPE_CHECKING:
    from skyward.storage.mount import MountedVolume

TERM_GRACE = 3.0
TICK = 0.2
RAY_STORE = "gcs_server"
RAYLET = "raylet"
CLOSE = "close"
"""A client's line: the pool closes, so every host stops it at once."""
STOP = "stop"
"""A client's line: this host leaves a pool that goes on (the others keep Ray's store)."""
SOCKET = "watchdog.sock"
"""The watchdog's socket in the pool directory, for a client that rejoins."""
REJOIN = "--rejoin"
POOL_ENV = "SKYWARD_POOL_DIR"
"""Set to the pool directory in the environment of what the pool starts on a host (Ray,
the head relay); what they start inherits it (a daemon a task spawned, say)."""


def marked_processes(pool_dir: str) -> list[psutil.Process]:
    """Processes that carry a mark of the pool, whoever their parent is now: their command
    line names ``pool_dir`` (itself or a path under it: ``/tmp/p-n1`` is not
    ``/tmp/p-n10``), their ``POOL_ENV`` is ``pool_dir``, or they hold a file under it open
    (Ray's workers and agents retitle themselves, "ray::IDLE", which can blank their
    environment, and may outlive their raylet; their logs are in the pool directory)."""
    me = os.getpid()
    inside = pool_dir.rstrip("/") + "/"
    marked = []
    for process in psutil.process_iter(["cmdline", "environ", "open_files"]):
        info = process.info
        if process.pid == me:
            continue
        if (
            any(part.endswith(pool_dir) or inside in part for part in info["cmdline"] or ())
            or (info["environ"] or {}).get(POOL_ENV) == pool_dir
            or any(file.path.startswith(inside) for file in info["open_files"] or ())
        ):
            marked.append(process)
    return marked


def pool_processes(pool_dir: str) -> list[psutil.Process]:
    """The pool's processes: the marked ones and their descendants."""
    found: dict[int, psutil.Process] = {}
    for process in marked_processes(pool_dir):
        found[process.pid] = process
        try:
            found.update((child.pid, child) for child in process.children(recursive=True))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    found.pop(os.getpid(), None)
    return list(found.values())


def stop_pool(pool_dir: str, leaving: bool = False) -> None:
    """Terminate the pool's processes (then kill stragglers) and remove its directory.
    Ray's cluster store (``RAY_STORE``, on the head) and raylet go last and are killed:
    a terminated raylet first tells the store it leaves and waits out its whole grace
    when the store is gone, which the head's is when every host stops at once, and
    neither keeps anything a pool going away needs. With ``leaving`` (this host leaves a
    pool that goes on) the raylet is terminated with the rest, so the store, which still
    runs, hears that it left."""
    last = (RAY_STORE,) if leaving else (RAY_STORE, RAYLET)
    for _ in range(3):
        processes = pool_processes(pool_dir)
        if not processes:
            break
        daemons = [process for process in processes if _named(process, last)]
        _signal([process for process in processes if process not in daemons], signal.SIGTERM)
        _signal(daemons, signal.SIGKILL)
    shutil.rmtree(pool_dir, ignore_errors=True)


def _named(process: psutil.Process, names: tuple[str, ...]) -> bool:
    try:
        return process.name() in names
    except psutil.Error:
        return False


def _signal(processes: list[psutil.Process], first: signal.Signals) -> None:
    """Send ``first`` to ``processes``; kill those alive ``TERM_GRACE`` seconds later."""
    for process in processes:
        try:
            process.send_signal(first)
        except psutil.NoSuchProcess:
            pass
    alive = _wait_ended(processes, TERM_GRACE)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    _wait_ended(alive, TERM_GRACE)


def _wait_ended(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for ``processes`` to end; those still running. A
    zombie has ended: reaping it is its parent's (or init's) business, which can lag."""
    deadline = time.monotonic() + timeout
    alive = processes
    while True:
        alive = [process for process in alive if _running(process)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def shut_down(*arguments: str) -> None:
    """Run ``shutdown`` with ``arguments`` as root (through sudo when not root)."""
    command = ["shutdown", *arguments]
    if os.geteuid() != 0:
        command = ["sudo", "-n", *command]
    try:
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pass


def mount_volumes(line: str) -> list[MountedVolume] | None:
    """Mount the volumes ``line`` carries; their MountedVolumes, or None after reporting
    ``MountFailed`` (nothing is left mounted then)."""
    from skyward.storage import pool_volumes
    from skyward.storage.errors import VolumeMountError

    started = time.monotonic()
    try:
        mounted = pool_volumes.mount_all(pool_volumes.decode(line))
    except VolumeMountError as error:
        say(messages.MountFailed(error.bucket, error.mount, error.cause))
        return None
    say(messages.VolumesMounted(round(time.monotonic() - started, 3)))
    return mounted


def unmount_volumes(mounted: list[MountedVolume]) -> None:
    """Unmount what ``mount_volumes`` mounted; ``UnmountFailed`` for what stays."""
    from skyward.storage import pool_volumes
    from skyward.storage.errors import VolumeMountError

    try:
        pool_volumes.unmount_all(mounted)
    except VolumeMountError as error:
        say(messages.UnmountFailed(error.bucket, error.mount, error.cause))


_said_to: dict[int, TextIO] = {0: sys.stdout}
"""The open streams of the watchdog's clients by number: stdout (0), then one a rejoin;
it speaks to the newest."""
_saying = threading.Lock()


def say(message: messages.FromHost) -> None:
    """Write ``message`` (a ``codec.marker`` line) to the newest client, if it still listens."""
    line = marker(message)
    with _saying:
        try:
            out = _said_to[max(_said_to)]
            out.write(line + "\n")
            out.flush()
        except (OSError, ValueError):  # the client is gone
            pass


def _forget(stream: int) -> None:
    """Stop speaking to ``stream`` (it ended); closed unless it is stdout."""
    with _saying:
        out = _said_to.pop(stream, None)
    if out is not None and stream:
        with contextlib.suppress(OSError):
            out.close()


@dataclass(slots=True)
class _Contact:
    """What the watchdog knows of its clients, under ``lock``: when it last heard from
    one, what one told it (``CLOSE`` or ``STOP``; None: nothing yet), which streams are open (stdin is 0, each rejoin adds
    one), when the last of them ended (None: one is open), and whether it is stopping
    (then no rejoin is taken)."""

    seen: float
    told: str | None = None
    ended: float | None = None
    open: set[int] = field(default_factory=lambda: {0})
    stopping: bool = False
    streams: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def listen(self, lines: TextIO, stream: int) -> None:
        """Read the ``lines`` of client ``stream``: heartbeats, then ``CLOSE`` or ``STOP``;
        when the last open stream ends, the countdown starts."""
        for line in lines:
            with self.lock:
                self.seen = time.monotonic()
                if line.strip() in (CLOSE, STOP):
                    self.told = line.strip()
                    return
        with self.lock:
            self.open.discard(stream)
            if not self.open:
                self.ended = time.monotonic()
        _forget(stream)

    def take_rejoins(self, server: socket.socket) -> None:
        """Accept on ``server`` (``rejoin_socket``; a thread's life): each connection of
        this user, until the watchdog stops, is a client's stream and stops the countdown."""
        from skyward.core.accepting import accepted
        from skyward.core.peers import ForeignPeer, require_same_user

        for connection in accepted(server, lambda warning: print(f"watchdog: {warning}", file=sys.stderr, flush=True)):
            try:
                require_same_user(connection, "a client rejoining the watchdog")
            except ForeignPeer:
                connection.close()
                continue
            with self.lock:
                if self.stopping:
                    connection.close()
                    continue
                stream = next(self.streams)
                self.open.add(stream)
                self.seen, self.ended = time.monotonic(), None
                with _saying:
                    _said_to[stream] = connection.makefile("w", encoding="utf-8")
            say(messages.Watching())
            lines = connection.makefile("r", encoding="utf-8")
            threading.Thread(target=self.listen, args=(lines, stream), daemon=True).start()

    def over(self, ttl: float, silence: float) -> bool:
        """Whether to stop the pool now: told to, the last stream ended ``ttl`` seconds
        ago, or nothing heard for ``silence`` seconds; from then on it is stopping."""
        with self.lock:
            now = time.monotonic()
            self.stopping = (
                self.told is not None or (self.ended is not None and now - self.ended >= ttl) or now - self.seen > silence
            )
            return self.stopping


def rejoin_socket(pool_dir: str) -> socket.socket | None:
    """``SOCKET`` in ``pool_dir``, listening (mode 0600 in the private pool directory);
    None, said to the client, when it cannot be made (the pool runs on, not rejoinable)."""
    try:
        return listening_at(os.path.join(pool_dir, SOCKET), backlog=4)
    except OSError as exc:
        say(messages.NotRejoinable(str(exc)))
        return None


def main(pool_dir: str, ttl: float, heartbeat: float, halt: bool, mount: bool = False) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    mounted: list[MountedVolume] = []
    if mount:
        done = mount_volumes(sys.stdin.readline())
        if done is None:
            stop_pool(pool_dir)
            raise SystemExit(1)
        mounted = done
    state = _Contact(seen=time.monotonic())
    threading.Thread(target=state.listen, args=(sys.stdin, 0), daemon=True).start()
    server = rejoin_socket(pool_dir)
    if server is not None:
        threading.Thread(target=state.take_rejoins, args=(server,), daemon=True).start()
    if halt:
        shut_down("-c")  # a client has come: the boot-time shutdown is this watchdog's job now
    say(messages.Watching())
    silence = max(ttl, 3 * heartbeat)
    while not state.over(ttl, silence):
        time.sleep(TICK)
    stop_pool(pool_dir, leaving=state.told == STOP)
    unmount_volumes(mounted)
    say(messages.Stopped())
    if halt and state.told is None:
        shut_down("-h", "now")


def rejoin() -> None:
    """Carry stdin to the watchdog of the pool directory named by its first line, and
    what it says to stdout, until it closes (see the module); ``WatchdogGone`` and exit
    status 1 when no watchdog listens there."""
    from skyward.core.peers import ForeignPeer, require_same_user

    pool_dir = sys.stdin.readline().strip()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(os.path.join(pool_dir, SOCKET))
        require_same_user(connection, "the watchdog")
    except (OSError, ForeignPeer) as exc:
        print(marker(messages.WatchdogGone(f"no watchdog of {pool_dir} listens: {exc}")), flush=True)
        raise SystemExit(1) from None

    def forward() -> None:
        """Stdin to the watchdog; once it ends (the client is gone), the proxy ends too."""
        try:
            for line in sys.stdin:
                connection.sendall(line.encode())
            connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    threading.Thread(target=forward, daemon=True).start()
    for line in connection.makefile("r", encoding="utf-8"):
        print(line, end="", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == [REJOIN]:
        rejoin()
    else:
        main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "halt", sys.argv[5:] == ["mount"])
