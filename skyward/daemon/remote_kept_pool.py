"""A remote kept pool (SSH hosts, cloud machines) as the pool daemon sees it: held by a
process of its own (``daemon.pool_host``), started with the environment and working
directory of the client that opened it (or, taking over a dead daemon's pool, with the
daemon's), so no thread of the daemon ever runs under another environment than its own.

The daemon keeps what every kept pool has (who holds it, its log, its dashboard board,
its record) and accepts on the pool's socket: a connection whose peer runs as this user
and is the pid holding the pool is handed to the host as it is (``serve``), and the
host serves it. What the host tells (``daemon.host_channel``) is applied here, on a
thread of the pool's: its nodes, the end of a session, and what its sessions sent the
script, which goes to the pool's log and board. What it prints goes to the daemon's
log file as it was when the host started (``pool NAME: held by pool host PID`` says
whose lines are whose): a file, not a pipe, so the host's writes cannot fail once the
daemon is gone, as it tears down a pool no successor would find. Should the host die,
the pool ends: the daemon is told (``ended``) and removes what it held in its cloud."""

from __future__ import annotations

import contextlib
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skyward.core import messages
from skyward.core.accepting import accepted
from skyward.core.codec import MalformedFrame, load_payload
from skyward.core.instance import InstanceInfo
from skyward.core.unix_listener import listening_at
from skyward.daemon.host_channel import HostChannel
from skyward.daemon.kept_pool import KeptPool
from skyward.model.nodes import NodeHandle

CLOSE_WAIT = 900.0
"""Seconds a host gets to tear its pool down (a cloud confirms its machines gone)."""
EXIT_WAIT = 30.0
"""Seconds a host that answered gets to exit before it is killed."""


class HostRefused(RuntimeError):
    """The pool's host could not do what it was asked, and said why."""


@dataclass(eq=False, kw_only=True)
class RemoteKeptPool(KeptPool):
    """A remote kept pool whose ``host`` holds it (see the module). ``session_ended`` is
    told each session's end (whether it was served); ``ended``, that the host died
    (``gone`` is set first)."""

    host: subprocess.Popen[bytes]
    channel: HostChannel
    session_ended: Callable[[RemoteKeptPool, bool], None]
    ended: Callable[[RemoteKeptPool], None]
    listener: socket.socket | None = None
    handed_over: bytes = b""
    """What the host last said a successor takes the pool over with."""
    gone: bool = False
    """Its host died (the pool ended with it)."""
    _answers: queue.Queue[messages.Message | None] = field(default_factory=queue.Queue)
    _closing: bool = False
    _handing: threading.Lock = field(default_factory=threading.Lock)
    """Held while a connection is handed to the host, and while the pool starts closing."""

    @classmethod
    def start(
        cls, opening: messages.OpenRemote | messages.TakeOverRemote, environ: Mapping[str, str], cwd: str, *,
        name: str, fingerprint: str, keep_alive: float, pool_id: str, socket_path: Path, resized: Callable[[], None],
        session_ended: Callable[[RemoteKeptPool, bool], None], ended: Callable[[RemoteKeptPool], None],
    ) -> RemoteKeptPool:
        """The pool ``opening`` asks for (named ``name``, ...), in a host started with
        ``environ`` and ``cwd``, once it runs. Raises ``HostRefused`` naming why it could
        not be opened (the host has then exited, or was killed)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:  # -P: the client's working directory is not searched for a skyward of its own
            host = subprocess.Popen(
                [sys.executable, "-P", "-m", "skyward.daemon.pool_host", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=dict(environ), cwd=cwd, stdin=subprocess.DEVNULL,
            )  # its stdout and stderr: the daemon's log file, which stays writable once the daemon is gone
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        print(f"pool {name}: held by pool host {host.pid}", flush=True)
        channel = HostChannel(ours)
        try:
            channel.send(opening)
            first = channel.receive()
        except (OSError, MalformedFrame) as exc:
            first, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = ""
        match first:
            case (messages.Members() as members, None):
                try:
                    pool = cls(
                        name, fingerprint, keep_alive, pool_id, _nodes(members.nodes), _infos(members.infos),
                        socket_path, resized=resized, host=host, channel=channel, handed_over=members.handover,
                        session_ended=session_ended, ended=ended,
                    )
                except BaseException:
                    _abandon(channel, host)
                    raise
                threading.Thread(target=pool._listen_to_host, name="skyward-pool-host", daemon=True).start()
                return pool
            case (messages.Refusal(error), None):
                channel.close()
                # it exits once it has removed what it started (ssh.launch.abandon): not killed, reaped
                threading.Thread(target=host.wait, name="skyward-pool-host-exit", daemon=True).start()
                raise HostRefused(error)
            case (other, _):
                why = f"its host answered {type(other).__name__}"
        channel.close()
        _end(host)
        raise HostRefused(why or f"its host exited with status {host.returncode}")

    def handover(self) -> bytes:
        return self.handed_over

    def recorded(self) -> None:
        """Tell the host the pool is written down (a successor would find it)."""
        with contextlib.suppress(OSError):
            self.channel.send(messages.Recorded())

    def listen(self, served: Callable[[socket.socket], None]) -> None:
        """Listen on the pool's socket (mode 0600 in the daemon's private directory) and
        pass each connection to ``served``, on a thread of the pool's, until ``tear_down``
        (or the host's death)."""
        listener = self.listener = listening_at(str(self.socket))

        def accept() -> None:
            for connection in accepted(listener, lambda warning: print(f"pool daemon: {warning}", flush=True)):
                served(connection)

        threading.Thread(target=accept, name="skyward-kept-accept", daemon=True).start()

    def serve(self, session: int, client: str, connection: socket.socket) -> None:
        """Have the host serve ``connection`` as relay session ``session`` to ``client``
        (with the holder's secret); the daemon's copy of it is closed. ``OSError`` when
        the host is gone or the pool closing."""
        with connection, self._handing:
            if self._closing or self.gone:
                raise OSError(f"the kept pool {self.name} is closing")
            self.channel.send(messages.ServeSession(session, self.secret, client), connection)

    def tell_watched(self, on: bool) -> None:
        """Tell the host whether a page follows the pool (its nodes sample metrics then)."""
        with contextlib.suppress(OSError):
            self.channel.send(messages.Metrics(on))

    def tear_down(self) -> None:
        """Have the host tear the pool down, and wait (``CLOSE_WAIT``) until it says so;
        ``HostRefused`` naming what is not confirmed gone (or that it did not answer)."""
        with self._handing:
            self._closing = True
        self._stop_listening()
        try:
            self.channel.send(messages.Close())
            answer = self._answers.get(timeout=CLOSE_WAIT)
        except (OSError, queue.Empty):
            answer = None
        self.channel.close()
        _end(self.host)
        match answer:
            case messages.Closed():
                return
            case messages.Refusal(error):
                raise HostRefused(error)
            case _:
                raise HostRefused(f"its host did not confirm it torn down (exit status {self.host.returncode})")

    def _stop_listening(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()

    def _listen_to_host(self) -> None:
        """Apply what the host tells until it is gone (a thread's life); if it died, the
        pool ends (``ended``) and the host is reaped."""
        while True:
            try:
                received = self.channel.receive()
            except (OSError, MalformedFrame) as exc:
                print(f"pool daemon: the host of {self.name} broke its channel: {exc}", flush=True)
                received = None
            if received is None:
                break
            message, connection = received
            if connection is not None:
                connection.close()
            logged = self.log.sink(None) if self.log is not None else None
            match message:
                case messages.Members(nodes, infos, handover):
                    with self.members_lock:
                        self._renew(_nodes(nodes), _infos(infos))
                        self.handed_over = handover
                    self.resized()
                case messages.SessionEnded(_, served):
                    self.session_ended(self, served)
                case messages.Events(node, batch) if logged is not None:
                    logged.events(node, batch)
                case messages.Report(text) if logged is not None:
                    logged.report(text)
                case messages.Lost(node, reason, preempted) if logged is not None:
                    logged.lost(node, reason, preempted)
                case messages.Observed(batch):
                    self.board.observed(batch)
                case messages.Closed() | messages.Refusal():
                    self._answers.put(message)
                case _:
                    pass
        self._answers.put(None)
        with self._handing:
            if self._closing:
                return
            self.gone = True
        self._stop_listening()
        self.channel.close()  # a host that broke the channel sees it end, and exits
        if self.log is not None:
            self.log.note(f"pool {self.name}: its host process ended (status {self.host.poll()})", "ERROR")
        self.ended(self)
        _end(self.host)


def _nodes(data: bytes) -> tuple[NodeHandle, ...]:
    nodes: tuple[NodeHandle, ...] = load_payload(data)  # from the pool's host, over the pair the daemon made
    return nodes


def _infos(data: bytes) -> tuple[InstanceInfo, ...]:
    infos: tuple[InstanceInfo, ...] = load_payload(data)  # from the pool's host, over the pair the daemon made
    return infos


def _abandon(channel: HostChannel, host: subprocess.Popen[bytes]) -> None:
    """Have ``host`` tear down the pool it opened for a pool that could not be kept, and
    end it (its answers are read until it closes: it exits once done)."""
    with contextlib.suppress(OSError, MalformedFrame):
        channel.send(messages.Close())
        while (received := channel.receive()) is not None and not isinstance(
            received[0], messages.Closed | messages.Refusal
        ):
            pass
    channel.close()
    _end(host)


def _end(host: subprocess.Popen[bytes]) -> None:
    """Wait ``EXIT_WAIT`` seconds for ``host`` to exit, then kill it."""
    try:
        host.wait(EXIT_WAIT)
    except subprocess.TimeoutExpired:
        host.kill()
        host.wait()
