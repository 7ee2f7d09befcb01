"""The process's private Ray instance, shared by the local pools open at the same time.

Started on first use with a private directory (mode 0700, a short path under the system
temp dir) that holds everything the local pools make: Ray's temp dir (``RAY_DIR``; Ray
makes it and all below it world-writable, so only its private parent keeps other users
out), the agents' lane sockets and their post-mortem notes. Started lean
(``providers/ray_start.py``: no API server, autoscaler or log monitor, no one-second
wait for the raylet), addressed as 127.0.0.1 (Ray's gRPC servers listen on every
interface all the same: its token guards them), token auth with a random per-process
token passed through the environment (so nothing is written to ~/.ray), usage stats
off, Ray's memory monitor off. Stopped, and its directory removed, when the last local
pool closes; if the client dies without stopping it (SIGKILL), its ``Reaper`` kills what
is left within seconds. A Ray instance the user started is used as it is and never
stopped by us.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import ray

from skyward.engine import interruptible
from skyward.providers.local.reaper import Reaper, mark, sweep
from skyward.providers.ray_start import lean, quiet

_SET_BY_RAY = ("PYTHONBREAKPOINT",)
"""What ``ray.init`` sets in the driver's environment (its debugger hook): put back at close."""
ENVIRONMENT = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_DEDUP_LOGS": "0",
    # Ray's memory monitor kills whichever worker its policy picks (often an idle agent)
    # when the machine is short of memory; without it the kernel kills the hungriest
    # process, and the agents' post-mortem notes name the cause.
    "RAY_memory_monitor_refresh_ms": "0",
}
_QUIET_LOGGERS = ("ray", "ray._private", "ray._raylet")
RAY_DIR = "ray"
"""Ray's temp dir, in the private directory (short: Ray's Unix socket paths, under it, are
limited to 107 bytes)."""


class DaemonRay(Protocol):
    """A pool daemon's Ray instance, as a lease names it (``daemon_client.Lease``)."""

    @property
    def address(self) -> str: ...

    @property
    def token(self) -> str: ...

    @property
    def temp_dir(self) -> str: ...
# Set by sky.Ray() (providers/ray/provider.py) while this process is attached to a cluster.
attached_address: str | None = None


STRAGGLER_TIMEOUT = 5.0
STOP_AFTER_INTERRUPT = 60.0
"""Seconds a Ctrl-C during Ray's start waits for that start to finish and Ray to stop
again, before the interrupt goes on (Ray left running at exit makes the script exit 1,
not 130; a second Ctrl-C leaves at once, its reaper ending Ray)."""


class LocalRay:
    """Reference-counted start/stop of the local Ray instance."""

    _lock = threading.Lock()
    _users = 0
    _owned = False
    _temp_dir: str | None = None
    _reaper: Reaper | None = None
    _saved_env: dict[str, str | None] = {}
    _token = ""
    _daemon_address: str | None = None

    # Ray must be stopped by the thread that started it (otherwise the process can die
    # in ray.shutdown), and pools open from any thread: one owner thread does both.
    _owner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skyward-ray")

    @classmethod
    def acquire(cls, daemon: DaemonRay | None = None) -> None:
        """Start Ray if this is the first local pool (or join the pool ``daemon``'s
        instance, when given and this process has used no other); otherwise share the
        running one."""
        with cls._lock:
            if cls._users == 0:
                started = cls._owner.submit(cls._start, daemon)
                try:
                    interruptible.result(started)
                except KeyboardInterrupt:  # Ray stops once the start it interrupted is done
                    stopping = cls._owner.submit(cls._stop)
                    with contextlib.suppress(Exception, KeyboardInterrupt):  # a second Ctrl-C: leave now
                        interruptible.result(stopping, STOP_AFTER_INTERRUPT)
                    raise
            cls._users += 1

    @classmethod
    def daemon_address(cls) -> str | None:
        """The pool daemon's Ray address while this process is joined to it, else None."""
        return cls._daemon_address

    @classmethod
    def token(cls) -> str:
        """The token of the Ray instance this process starts or joins."""
        return cls._token

    @classmethod
    def release(cls) -> None:
        """Stop Ray and remove its files when the last local pool lets go."""
        with cls._lock:
            cls._users = max(0, cls._users - 1)
            if cls._users == 0:
                cls._owner.submit(cls._stop).result()

    @classmethod
    def in_use(cls) -> bool:
        """True while a local pool holds the local Ray instance."""
        return cls._users > 0

    @classmethod
    def temp_dir(cls) -> str | None:
        """The private directory (mode 0700) of the Ray instance this process started or
        joined, where local pools put their files; None when Ray is not ours."""
        return cls._temp_dir

    @classmethod
    def _start(cls, daemon: DaemonRay | None = None) -> None:
        if daemon is not None and not ray.is_initialized():
            cls._join(daemon)
            return
        if attached_address is not None:
            raise RuntimeError(
                f"this process is attached to the Ray cluster at {attached_address} by a sky.Ray() pool; a "
                "process holds one Ray connection, so sky.Local() cannot start its own: close that pool "
                "first, or run the local pool in another process"
            )
        if ray.is_initialized():
            cls._owned = False
            return
        cls._temp_dir = tempfile.mkdtemp(prefix="sky-")  # mode 0700
        cls._token = secrets.token_hex(32)  # each instance its own (_reload_ray_config drops the cached one)
        env = {**ENVIRONMENT, "RAY_AUTH_TOKEN": cls._token}
        cls._saved_env = {key: os.environ.get(key) for key in (*env, *_SET_BY_RAY)}
        os.environ.update(env)
        _reload_ray_config()
        cls._reaper = Reaper.start(cls._temp_dir)
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            temp_dir = os.path.join(cls._temp_dir, RAY_DIR)
            with _marking(cls._temp_dir):
                lean(lambda: ray.init(
                    num_cpus=os.cpu_count() or 1,
                    num_gpus=0,  # local nodes use no GPU (``sky.Local``): Ray skips detecting them (NVML)
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    _temp_dir=temp_dir,
                    _node_ip_address="127.0.0.1",
                    namespace="skyward",
                ))
        except BaseException:
            cls._stop_owned()
            raise
        cls._owned = True

    @classmethod
    def _join(cls, daemon: DaemonRay) -> None:
        """Join the pool daemon's Ray instance (its token from now on, as Ray keeps the
        first token a process uses)."""
        cls._token = daemon.token
        env = {**ENVIRONMENT, "RAY_AUTH_TOKEN": daemon.token}
        cls._saved_env = {key: os.environ.get(key) for key in (*env, *_SET_BY_RAY)}
        os.environ.update(env)
        _reload_ray_config()
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            quiet(lambda: ray.init(
                address=daemon.address, log_to_driver=False, logging_level=logging.ERROR, namespace="skyward"
            ))
        except BaseException:
            restore_environment(cls._saved_env)
            cls._saved_env = {}
            raise
        cls._daemon_address = daemon.address
        cls._temp_dir = daemon.temp_dir

    @classmethod
    def _stop(cls) -> None:
        if cls._daemon_address is not None:
            try:
                ray.shutdown()  # leaves the daemon's instance; it stays up
            finally:
                restore_environment(cls._saved_env)
                cls._saved_env = {}
                _reload_ray_config()
                cls._daemon_address = None
                cls._temp_dir = None
            return
        if cls._owned:
            cls._stop_owned()
        cls._owned = False

    @classmethod
    def _stop_owned(cls) -> None:
        try:
            ray.shutdown()
        finally:
            restore_environment(cls._saved_env)
            cls._saved_env = {}
            _reload_ray_config()
            if cls._temp_dir:  # what ray.shutdown left (a respawned or stuck process): gone before close returns
                sweep(cls._temp_dir, timeout=STRAGGLER_TIMEOUT)
            cls._temp_dir = None
            if cls._reaper is not None:
                cls._reaper.stop()
            cls._reaper = None


@contextlib.contextmanager
def _marking(temp_dir: str) -> Iterator[None]:
    """The instance's mark (``reaper.mark``) in this process's environment while Ray
    starts, so that its GCS and raylet inherit it (and the raylet passes it on to every
    agent and worker), and only while it starts: a process the program starts later, its
    own server, a pool daemon, a cluster of its own, must not carry the pool's mark, or
    the pool's close (``sweep``) and its reaper would kill it. (A process another thread
    starts during that second or two still inherits it: the environment is the
    process's.)"""
    marked = mark(temp_dir)
    before = {key: os.environ.get(key) for key in marked}
    os.environ.update(marked)
    try:
        yield
    finally:
        restore_environment(before)


def restore_environment(saved: dict[str, str | None]) -> None:
    """Put back the environment variables ``saved`` (None: it was not set)."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _reload_ray_config() -> None:
    """Make Ray re-read its settings and its token from the environment: it caches both
    (the token for the whole process, at first use), and they must follow the variables
    set just before ``ray.init`` and put back after ``ray.shutdown``. Without it a user's
    own ``ray.init()`` after a pool in the same process starts a GCS that finds token
    auth on and no token (this process's cached one is never written down), and a pool
    after the user's own ``ray.shutdown()`` joins its instance with the user's token.
    The settings first, as Ray's own tests reset them: a core-worker thread still
    draining reloads the token while the settings say token mode."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # not in Ray's stubs

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
