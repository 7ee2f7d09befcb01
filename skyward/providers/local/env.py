"""The environment a local pool's agents run in, built from its Image on this machine.

An Image without packages (``pip``) runs in this process's own environment, as local
pools always did. One with packages gets a virtual environment made by uv under
``~/.skyward/envs/<hash>`` (``$SKYWARD_HOME``), keyed by a content hash of what it holds
(this interpreter, this skyward, the packages and their indexes), built once and reused
warm by later pools (a lock file lets one pool build while others wait). It holds:

- skyward itself: the wheel of this very copy (``ssh.wheels.skyward_wheel``), without
  its dependencies;
- ``Image.pip``, installed by uv grouped by index exactly as remote nodes install it
  (``skyward.image.script.pip_groups``);
- a ``.pth`` file that appends this environment's site directories after its own, so
  Ray, cloudpickle and the rest of skyward's dependencies come from the client (the
  agents must run the very Ray of the client) while the Image's packages win over the
  client's copies.

The agents then start with that venv's interpreter (Ray's ``runtime_env`` ``py_executable``).
``Image.shell_vars`` are evaluated here with bash; the plugins' bootstrap ops run here
too (once per pool, with the venv active), after the Image's steps.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path

from msgspec import Struct, field

from skyward.core.paths import skyward_dir
from skyward.image.image import Image
from skyward.image.script import BootstrapOp, pip_groups

KEY_VERSION = "1"
LOCK_POLL = 0.2
OUTPUT_TAIL = 3000


class LocalEnvError(RuntimeError):
    """Building a local pool's environment failed; the message names the step, the
    command and its output."""


class LocalEnvironment(Struct, frozen=True):
    """Where local agents run: ``python`` is the venv's interpreter (None: this
    process's environment), ``env`` the variables to add (``Image.env`` and the
    evaluated ``shell_vars``), ``phases`` how long each step took."""

    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    phases: tuple[tuple[str, float], ...] = ()

    @property
    def venv(self) -> str | None:
        return str(Path(self.python).parents[1]) if self.python else None


def client_site_dirs() -> list[str]:
    """This interpreter's site directories (where Ray and skyward's dependencies are)."""
    paths = sysconfig.get_paths()
    found = [paths["purelib"], paths["platlib"], *(p for p in sys.path if p.endswith("site-packages"))]
    return list(dict.fromkeys(p for p in found if os.path.isdir(p)))


def env_key(image: Image, skyward_wheel: str) -> str:
    """The content hash naming the venv of ``image``."""
    parts = [
        KEY_VERSION, os.path.realpath(sys.executable), sys.version, skyward_wheel, *client_site_dirs(), "|",
        *image.pip, "|", *(f"{index.url} {' '.join(index.packages)}" for index in image.pip_indexes),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def prepare(image: Image, ops: Sequence[BootstrapOp], timeout: float) -> LocalEnvironment:
    """Build (or reuse) ``image``'s environment, evaluate its shell_vars and run
    ``ops``, all within ``timeout`` seconds; LocalEnvError naming what failed."""
    deadline = time.monotonic() + timeout
    phases: list[tuple[str, float]] = []
    python = None
    if image.pip:
        started = time.monotonic()
        python = _venv(image, deadline)
        phases.append(("venv", time.monotonic() - started))
    env = dict(image.env)
    for name, snippet in image.shell_vars.items():
        env[name] = _run(["bash", "-c", snippet], "shell_vars", f"Image.shell_vars[{name!r}]", deadline).strip()
    if ops:
        started = time.monotonic()
        shell_env = {**os.environ, **env, **(_activated(python) if python else {})}
        for op in ops:
            _run(["bash", "-c", op.command], "plugins", f"plugin {op.plugin!r} bootstrap op {op.command!r}",
                 deadline, shell_env)
        phases.append(("plugins", time.monotonic() - started))
    return LocalEnvironment(python, env, tuple(phases))


def _venv(image: Image, deadline: float) -> str:
    """The venv's interpreter, built unless a complete one with the same key exists."""
    from skyward.providers.ssh import wheels  # packaging (about 25 ms): only for an Image that installs

    wheel = wheels.skyward_wheel()
    root = skyward_dir("envs") / env_key(image, wheel.name)
    python = root / "venv" / "bin" / "python"
    ready = root / ".ready"
    if ready.is_file():
        return str(python)
    root.mkdir(parents=True, exist_ok=True)
    with open(root.with_suffix(".lock"), "w") as lock:
        _lock(lock, deadline, root)
        if ready.is_file():  # another pool built it while we waited
            return str(python)
        shutil.rmtree(root / "venv", ignore_errors=True)
        uv = _uv()
        _run([uv, "venv", "--quiet", "--python", sys.executable, str(root / "venv")], "venv", "uv venv", deadline)
        site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    "venv", "find the venv's site-packages", deadline).strip()
        lines = [f"import site; site.addsitedir({path!r})" for path in client_site_dirs()]
        Path(site, "_skyward_client.pth").write_text("\n".join(lines) + "\n")
        install = [uv, "pip", "install", "--quiet", "--python", str(python)]
        _run([*install, "--no-deps", str(wheel)], "skyward", "install this skyward", deadline)
        for group in pip_groups(image):
            _run([*install, *group.arguments], "pip", f"install {' '.join(group.packages)}", deadline)
        ready.write_text(sys.version)
    return str(python)


def _lock(lock: object, deadline: float, root: Path) -> None:
    """Take the env's build lock, waiting until ``deadline`` at most."""
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[arg-type]
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LocalEnvError(
                    f"another pool is still building the environment {root}; it did not finish within "
                    "Image.bootstrap_timeout: raise it, or remove that directory if no pool is building it"
                ) from None
            time.sleep(LOCK_POLL)


def _uv() -> str:
    """The uv binary: the ``uv`` package skyward depends on, else one on PATH."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise LocalEnvError(
                "a local pool with Image.pip needs uv to build its environment: pip install uv"
            ) from None
        return found


def _activated(python: str) -> dict[str, str]:
    venv = Path(python).parents[1]
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(command: list[str], phase: str, what: str, deadline: float, env: dict[str, str] | None = None) -> str:
    """Run ``command``; its stdout, or LocalEnvError naming ``phase``, ``what`` and the output."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise LocalEnvError(f"{phase}: {what} did not start: Image.bootstrap_timeout ran out; raise it")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=left, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LocalEnvError(f"{phase}: {what} did not finish within Image.bootstrap_timeout; raise it") from None
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-OUTPUT_TAIL:]
        raise LocalEnvError(f"{phase}: {what} failed on this machine (exit {done.returncode}):\n{output}")
    return done.stdout
