"""Starting Ray without what a skyward pool never uses, and without Ray's one-second wait.

A Ray start (``ray.init`` that starts an instance) runs three Python daemons a pool has
no use for, each booting on the same cores as the raylet the start waits for:

- the API server (Ray's dashboard head, started even with ``include_dashboard=False``,
  for Ray's job and state APIs and usage stats), whose start blocks until it answers,
  ~0.4 s, before the raylet is even started;
- the autoscaler monitor (a fixed local instance never scales; ~40 MB, and it ignores
  SIGTERM, so ``ray.shutdown`` would wait a full second for it);
- the log monitor (it streams workers' log files to the GCS for ``log_to_driver``, which
  skyward turns off: agents capture a task's output themselves; idle, it polls every
  0.1 s, ~0.7% of a core).

The raylet then starts a fourth, its dashboard agent, and registers with the GCS only
once that agent has written its ports down, which it does after booting Ray in Python
(0.4-0.7 s); without a dashboard it has none to report.

Then the start waits for the raylet to register with the GCS: Ray asks 0.1 s after
starting it and, until it is there, once a second (the C++ ``GetNode``), so a raylet that
registers after 0.5 s is found after 1.1 s, one that registers after 1.3 s after 2.1 s.
The raylet itself, now and then (4 starts in 42 here), waits a second before its object
manager starts: it connects to the object store its own thread is starting, and a
connection that finds no socket yet is tried again a second later (Ray's
``raylet_client_connect_timeout_milliseconds``, which also paces every Ray process's
connection to its raylet).

``lean`` runs a start without the three daemons and with ``ray_agent_stand_in``, which
reports "no service" at once, where the raylet would start its dashboard agent; it asks
the GCS for the raylet every ``POLL`` seconds before Ray's own question, which then
finds it at once; its processes try a connection to their raylet or object store again
after 10 ms instead of a second, as many times more (``CONNECT``: the same patience); and
it runs without the driver thread that prints every error Ray
publishes (a "(raylet) A worker died ..." paragraph on stderr for each agent death,
whatever ``Options.console`` says): skyward reports deaths itself, as a
``NodeCrashedError`` and an ``Error`` event naming the cause.
``quiet`` is that last part alone, for a ``ray.init`` that joins a running instance.
Both also leave out, in this process and in every worker of the instance ``lean``
starts (``ray_worker``), Ray's serializers for libraries skyward never hands Ray, which
Ray imports as each process connects (pydantic alone is 50-70 ms of CPU a process).

Run as ``python -m skyward.providers.ray_start ARGS`` (``main``), this is Ray's command
line with its ``ray start`` lean; a host joining a head that is still starting takes the
head's address from stdin (``ADDRESS_ON_STDIN``), having booted meanwhile.

These are Ray's internals (``ray._private``). Each change is made only where what it
replaces is there; where Ray has moved one, that part of the start runs as Ray's own,
and only its saving is lost.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from skyward.providers.ray_import import import_ray
from skyward.providers.ray_worker import ray_addons, ray_worker_script, when_imported

POLL = 0.01
"""Seconds between the GCS questions ``lean`` asks while the raylet registers."""
DASHBOARD_AGENT = "dashboard_agent"
RUNTIME_ENV_AGENT = "runtime_env_agent"
AGENTS = (DASHBOARD_AGENT, RUNTIME_ENV_AGENT)
"""Ray's names for its node agents' process types (``ray_constants.PROCESS_TYPE_*``),
which are also the stand-in's roles."""
STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray_agent_stand_in.py")
"""The script that runs in the agents' place (``ray_agent_stand_in``)."""
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray_worker.py")
"""The script that runs in the place of Ray's worker script (``ray_worker``)."""
CONNECT = {"RAY_raylet_client_connect_timeout_milliseconds": "10", "RAY_raylet_client_num_connect_attempts": "1000"}
"""Ray's settings for a connection to a raylet or its object store, in the environment of
the processes a start runs: tried again every 10 ms, up to 10 s in all (Ray's own: every
second, 10 times)."""
REGISTER_TIMEOUT = 30.0
"""Seconds ``lean`` asks before leaving the question to Ray (Ray's own limit is 30 s)."""


def lean(init: Callable[[], object]) -> None:
    """``init()`` (a ``ray.init`` that starts an instance, or Ray's ``ray start``) as the
    module says."""
    try:
        from ray._private import node, services, worker
    except ImportError:  # Ray has moved them: its start as it ships
        init()
        return
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(CONNECT))
        stack.enter_context(_swapped(worker, "listen_error_messages", _listen_to_nothing))
        stack.enter_context(_addons_when_imported())
        start_raylet = getattr(services, "start_raylet", None)
        if start_raylet is not None:
            stack.enter_context(_swapped(services, "start_raylet", _our_worker(start_raylet)))
        for daemon in ("start_api_server", "start_monitor", "start_log_monitor"):
            stack.enter_context(_swapped(node.Node, daemon, _start_nothing))
        command = getattr(services, "_build_python_executable_command_memory_profileable", None)
        if command is not None:
            stack.enter_context(_swapped(services, command.__name__, _stand_in_for_agents(command)))
        get_node = getattr(services, "get_node", None)
        if get_node is not None:
            stack.enter_context(_swapped(services, "get_node", _registered_first(get_node)))
        init()


def quiet(init: Callable[[], object]) -> None:
    """``init()`` (a ``ray.init`` that connects to a running instance: the pool daemon's)
    without the driver's error listener and with Ray's serialization addons only for
    what this process imported already, as in ``lean``; nothing is started, so nothing
    else changes."""
    try:
        from ray._private import worker
    except ImportError:
        init()
        return
    with _swapped(worker, "listen_error_messages", _listen_to_nothing), _addons_when_imported():
        init()


@contextlib.contextmanager
def _swapped(owner: object, name: str, value: object) -> Iterator[None]:
    """``owner.name`` is ``value`` for the block, then what it was; nothing changes when
    ``owner`` has no ``name``."""
    if not hasattr(owner, name):
        yield
        return
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block (where it does not set them already: a
    user's own setting stays), then what was there."""
    added = {name: value for name, value in values.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def _addons_when_imported() -> Iterator[None]:
    """For the block (an ``init``), Ray's serialization addons only for a process that has
    imported a library they are for (``ray_worker.when_imported``). This process's
    serialization context is made before the block ends (Ray makes it at its first use),
    so that it keeps what it registered then."""
    addons = ray_addons()
    try:
        from ray._private import worker
    except ImportError:
        addons = None
    if addons is None:
        yield
        return
    with _swapped(addons, "apply", when_imported(addons.apply)):
        yield
        connected = getattr(worker, "global_worker", None)
        make = getattr(connected, "get_serialization_context", None)
        if make is not None and getattr(connected, "connected", False):
            with contextlib.suppress(Exception):  # Ray internals moved: Ray makes it at its first use
                make()


def _our_worker(start_raylet: Callable[..., object]) -> Callable[..., object]:
    """``start_raylet`` (Ray's ``services.start_raylet``), except that the raylet's
    workers run ``WORKER`` in the place of Ray's worker script, with its arguments: only
    when the script it is given is the one ``ray_worker`` would run (``ray_worker_script``),
    so a Ray that moved it, or a caller that gave another, starts as it would."""
    try:
        signature = inspect.signature(start_raylet)
    except (TypeError, ValueError):
        return start_raylet
    ours = ray_worker_script()
    if "worker_path" not in signature.parameters or ours is None:
        return start_raylet

    def started(*args: object, **options: object) -> object:
        bound = signature.bind(*args, **options)
        path = bound.arguments.get("worker_path")
        if isinstance(path, str) and os.path.realpath(path) == os.path.realpath(ours):
            bound.arguments["worker_path"] = WORKER
        return start_raylet(*bound.args, **bound.kwargs)

    return started


def _listen_to_nothing(worker: object, threads_stopped: threading.Event) -> None:
    """Takes the place of Ray's driver error listener."""


def _start_nothing(node: object, *args: object, **options: object) -> None:
    """Takes the place of a ``Node`` method that starts a daemon."""


def _stand_in_for_agents(command: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """``command`` (Ray's ``services._build_python_executable_command_memory_profileable``),
    except that each agent's interpreter runs ``STAND_IN`` in that agent's role before
    Ray's agent script, which then is only an argument."""

    def built(component: str, *args: object, **options: object) -> list[str]:
        if component in AGENTS:
            return [sys.executable, "-S", STAND_IN, component]
        return command(component, *args, **options)

    return built


def _registered_first(get_node: Callable[[str, str], object]) -> Callable[[str, str], object]:
    """``get_node`` (Ray's ``services.get_node``), asked once the GCS lists the node."""

    def get_registered_node(gcs_address: str, node_id: str) -> object:
        wait_registered(gcs_address, node_id, REGISTER_TIMEOUT)
        return get_node(gcs_address, node_id)

    return get_registered_node


def wait_registered(gcs_address: str, node_id: str, timeout: float) -> bool:
    """Whether the GCS at ``gcs_address`` lists the node ``node_id`` (hex) alive within
    ``timeout`` seconds, asking every ``POLL`` seconds. False also when the GCS cannot be
    asked (after Ray's own connection timeout, 15 s here for a GCS that never answers):
    the caller's own question then decides."""
    from ray._private import services
    from ray._private.state import GlobalState

    state = GlobalState()
    try:
        state._initialize_global_state(services._get_gcs_client_options(gcs_address))
        deadline = time.monotonic() + timeout
        while True:
            if any(row.get("NodeID") == node_id and row.get("Alive") for row in state.node_table()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)
    except Exception:  # Ray internals moved, or the GCS is not up: Ray's own question decides
        return False
    finally:
        with contextlib.suppress(Exception):
            state.disconnect()


ADDRESS_ON_STDIN = "--address=-"
"""In ``main``'s arguments: the GCS address is the next line of stdin, read once Ray is
imported, so a host that joins a head still starting boots its Python meanwhile."""


def main() -> None:
    """``python -m skyward.providers.ray_start ARGS``: Ray's command line (``ray ARGS``),
    its ``ray start`` lean as ``lean`` says (the callers' ``--no-monitor`` and
    ``--include-log-monitor=false`` also leave the two monitors out, should a Ray move
    what ``lean`` swaps). ``ADDRESS_ON_STDIN`` among ARGS takes the address from stdin;
    exits with an error naming it when stdin ends first (the head's start failed)."""
    import_ray("ray.scripts.scripts")  # Ray's command line imports requests too
    from ray.scripts.scripts import main as ray_main

    if ADDRESS_ON_STDIN in sys.argv:
        address = sys.stdin.readline().strip()
        if not address:
            raise SystemExit("skyward ray_start: stdin ended before the GCS address for --address=- came")
        sys.argv[sys.argv.index(ADDRESS_ON_STDIN)] = f"--address={address}"
    lean(ray_main)


if __name__ == "__main__":
    main()
