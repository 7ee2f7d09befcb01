"""``Image`` -> an idempotent bash script that prepares a node.

Installs go into ``~/.cache/skyward/envs/<hash>``, where ``hash`` is a content hash of
everything installed (Python version, shipped wheels, pip packages and indexes, apt
packages, includes): each phase leaves a marker there, so a second pool with the same
Image skips what is done. Hosts that share one home directory (NFS homes) take a lock
on that env (a directory created atomically, broken when older than the bootstrap
timeout), so one installs and the others then find it done. Per-pool files (shell_vars
values, Ray's temp dir, logs) go into the pool directory under /tmp, removed at
teardown.

skyward itself is always the wheel shipped from the client, installed by path with no
index. ``Image.pip`` comes from the package indexes when the nodes can reach them, else
from wheels the client resolved for the nodes and shipped (``Artifacts.pip_shipped``).

The script reports on stdout with marker lines the runner parses:
``::phase NAME`` when a phase starts, ``::failed PHASE CODE`` + ``::command CMD`` + the
command's output when one fails, ``::versions JSON`` and ``::ready`` at the end.
Environment values are never printed.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:
    from skyward.image.image import Image

SCRIPT_VERSION = "1"
CACHE = "$HOME/.cache/skyward"
WHEELS = f"{CACHE}/wheels"
DEFAULT_INDEX = "https://pypi.org/simple"


class BootstrapOp(Struct, frozen=True):
    """One shell command a plugin's ``bootstrap`` hook asked for."""

    plugin: str
    command: str


class Artifacts(Struct, frozen=True):
    """What the client ships: wheel file names (in WHEELS) and the includes archive."""

    skyward_wheel: str
    wheels_key: str
    includes_archive: str | None
    includes_digest: str
    pip_shipped: bool = False
    """``Image.pip`` was resolved on the client and shipped: install it without an index."""


def env_hash(image: Image, artifacts: Artifacts) -> str:
    """Content hash of what a node installs for ``image``."""
    parts = [
        SCRIPT_VERSION,
        image.python_version,
        artifacts.skyward_wheel,
        artifacts.wheels_key,
        artifacts.includes_digest,
        *sorted(image.apt),
        "|",
        *image.pip,
        "|",
        *(f"{index.url} {' '.join(index.packages)}" for index in image.pip_indexes),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def env_dir(image: Image, artifacts: Artifacts) -> str:
    """The environment the script makes for ``image``, as a host's shell spells it in
    double quotes (it names ``$HOME``)."""
    return f"{CACHE}/envs/{env_hash(image, artifacts)}"


def render(
    image: Image,
    artifacts: Artifacts,
    pool_dir: str,
    lock_timeout: float,
    *,
    mount_points: Sequence[str] = (),
    plugin_ops: Sequence[BootstrapOp] = (),
) -> str:
    """The bootstrap script for one node. With ``mount_points`` (the pool's volumes) it
    installs s3fs with apt when the node lacks it, and makes the mount points a non-root
    user cannot create (through sudo, owned by that user; they stay, empty, after the
    pool). ``plugin_ops`` (the plugins' bootstrap hooks) run last, at every bootstrap,
    in the pool's work directory with the node's environment active."""
    q = shlex.quote
    lines = [
        _PRELUDE.format(
            env=env_dir(image, artifacts), pool=q(pool_dir), wheels=WHEELS, python=q(image.python_version),
            lock_timeout=int(lock_timeout),
        ),
        "take_lock",
        "phase uv",
        "once uv install_uv",
        "phase apt",
    ]
    if image.apt:
        lines.append(f"once apt-{_short(image.apt)} install_apt {' '.join(q(p) for p in image.apt)}")
    if mount_points:
        lines.append("command -v s3fs >/dev/null 2>&1 || install_apt s3fs")
        lines.append(f"prepare_mount_points {' '.join(q(p) for p in mount_points)}")
    lines += ["phase python", "find_python", "phase venv", 'once venv run "$UV" venv --python "$PY" "$ENV/venv"']
    lines.append("phase skyward")
    wheel = f'"$WHEELS"/{q(artifacts.skyward_wheel)}'
    lines.append(f'once skyward run "$UV" pip install --python "$VPY" --no-index --find-links "$WHEELS" {wheel}')
    lines.append("phase pip")
    if artifacts.pip_shipped and image.pip:
        packages = " ".join(q(p) for p in image.pip)
        lines.append(
            f'once pip-{_short(image.pip)} run "$UV" pip install --python "$VPY" --no-index --find-links "$WHEELS" {packages}'
        )
    else:
        lines += _pip_from_indexes(image)
    lines.append("phase includes")
    if artifacts.includes_archive:
        lines.append(f'once includes run tar -xzf "$CACHE"/{q(artifacts.includes_archive)} -C "$ENV/includes"')
    lines.append("phase shell_vars")
    for name, snippet in image.shell_vars.items():
        lines.append(f"shell_var {q(name)} {q(snippet)}")
    lines.append("phase plugins")
    for op in plugin_ops:
        lines.append(f"plugin_op {q(op.plugin)} {q(op.command)}")
    lines.append("finish")
    return "\n".join(lines) + "\n"


class PipGroup(Struct, frozen=True):
    """One ``uv pip install``: ``packages`` looked up first in ``indexes`` (then the default index)."""

    indexes: tuple[str, ...]
    packages: tuple[str, ...]
    scoped: bool = False
    """The packages a ``PipIndex`` names: only from that index."""

    @property
    def arguments(self) -> list[str]:
        """``uv pip install``'s arguments after ``--python``: indexes, then packages."""
        return [option for url in self.indexes for option in ("--index", url)] + list(self.packages)


def pip_groups(image: Image) -> list[PipGroup]:
    """How ``Image.pip`` is installed (remote nodes and local pools alike): packages a
    ``PipIndex`` names only from that index, the rest from the default index plus the
    indexes that name no packages."""
    groups = []
    scoped: set[str] = set()
    for index in image.pip_indexes:
        if index.packages:
            wanted = [p for p in image.pip if requirement_name(p) in {requirement_name(n) for n in index.packages}]
            scoped.update(requirement_name(p) for p in wanted)
            if wanted:
                groups.append(PipGroup((index.url,), tuple(wanted), scoped=True))
    rest = [p for p in image.pip if requirement_name(p) not in scoped]
    if rest:
        groups.append(PipGroup(tuple(i.url for i in image.pip_indexes if not i.packages), tuple(rest)))
    return groups


def _pip_from_indexes(image: Image) -> list[str]:
    """The script lines installing ``Image.pip`` (see ``pip_groups``)."""
    lines = []
    for group in pip_groups(image):
        marker = _short([*group.indexes, *group.packages] if group.scoped else list(group.packages))
        arguments = " ".join(shlex.quote(a) for a in group.arguments)
        lines.append(f'once pip-{marker} run "$UV" pip install --python "$VPY" {arguments}')
    return lines


def index_urls(image: Image) -> list[str]:
    """The package indexes a node needs for ``Image.pip`` (the default one unless every
    package has an index of its own)."""
    scoped = {requirement_name(p) for index in image.pip_indexes for p in index.packages}
    urls = [index.url for index in image.pip_indexes if index.packages or image.pip]
    if any(requirement_name(p) not in scoped for p in image.pip):
        urls.insert(0, DEFAULT_INDEX)
    return list(dict.fromkeys(urls)) if image.pip else []


def requirement_name(requirement: str) -> str:
    """A requirement's normalised project name (``Foo_Bar>=1`` -> ``foo-bar``)."""
    for stop in "<>=!~[; @":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower().replace("_", "-")


def _short(values: list[str] | tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join(values).encode()).hexdigest()[:8]


_PRELUDE = r"""#!/usr/bin/env bash
set -uo pipefail
export LC_ALL=C
CACHE="$HOME/.cache/skyward"
ENV="{env}"
POOL={pool}
WHEELS="{wheels}"
WANT_PYTHON={python}
UV="$CACHE/bin/uv"
VPY="$ENV/venv/bin/python"
CURRENT=start
mkdir -p "$ENV/includes" "$POOL/work" "$CACHE/bin" "$WHEELS"
echo "::env $ENV"

phase() {{ CURRENT="$1"; echo "::phase $1"; }}

LOCK="$ENV.lock"
take_lock() {{  # hosts sharing this home install one at a time; a stale lock is broken
    mkdir -p "$(dirname "$ENV")"
    local waited=0
    until mkdir "$LOCK" 2>/dev/null; do
        if [ -n "$(find "$LOCK" -maxdepth 0 -mmin +$(( ({lock_timeout} + 59) / 60 )) 2>/dev/null)" ]; then
            rm -rf "$LOCK"; continue
        fi
        [ $waited -eq 0 ] && echo "::phase wait-for-shared-home"
        sleep 0.5; waited=1
    done
    trap 'rm -rf "$LOCK"' EXIT
    trap 'rm -rf "$LOCK"; exit 143' TERM INT HUP
}}

run() {{  # run a command; on failure report it with its output and stop
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne 0 ]; then
        echo "::failed $CURRENT $rc"
        echo "::command $*"
        printf '%s\n' "$out" | tail -n 80
        exit 1
    fi
}}

once() {{  # run a step unless its marker says it is done for this env
    local marker="$ENV/.done-$1"; shift
    [ -e "$marker" ] && return 0
    "$@"
    touch "$marker"
}}

install_uv() {{
    if command -v uv >/dev/null 2>&1 && [ ! -x "$UV" ]; then
        ln -sf "$(command -v uv)" "$UV"; return
    fi
    [ -x "$UV" ] && return
    local wheel
    wheel=$(ls "$WHEELS"/uv-*.whl 2>/dev/null | head -n 1)
    if [ -z "$wheel" ]; then
        echo "::failed uv 1"; echo "::command find uv"; echo "uv is not on PATH and no uv wheel was shipped"; exit 1
    fi
    local tmp="$CACHE/bin/uv.$$"
    if command -v unzip >/dev/null 2>&1; then
        run sh -c "unzip -p '$wheel' '*/scripts/uv' > '$tmp'"
    else
        run python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [m for m in z.namelist() if m.endswith('/scripts/uv')][0]; open(sys.argv[2], 'wb').write(z.read(n))" "$wheel" "$tmp"
    fi
    chmod +x "$tmp" && mv "$tmp" "$UV"
}}

install_apt() {{
    local missing=()
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${{#missing[@]}} -eq 0 ] && return
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
    run $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    run $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${{missing[@]}}"
}}

prepare_mount_points() {{  # what a non-root user cannot create is made for it with sudo
    [ "$(id -u)" -eq 0 ] && return 0
    local point parent
    for point in "$@"; do
        parent="$point"
        while [ ! -e "$parent" ]; do parent=$(dirname "$parent"); done
        if [ "$parent" != "$point" ] && [ ! -w "$parent" ]; then
            run sudo -n install -d -o "$(id -u)" -g "$(id -g)" "$point"
        fi
    done
}}

find_python() {{
    if [ -x "$VPY" ]; then PY="$VPY"; return; fi
    PY=$("$UV" python find --no-python-downloads "$WANT_PYTHON" 2>/dev/null)
    [ -n "$PY" ] && return
    local out
    if ! out=$("$UV" python install "$WANT_PYTHON" 2>&1); then
        echo "::failed python 1"
        echo "::command uv python install $WANT_PYTHON"
        echo "this host has no Python $WANT_PYTHON (the client's version) and uv could not install it:"
        printf '%s\n' "$out" | tail -n 20
        echo "fix: install python$WANT_PYTHON on the host, or give it internet access for uv"
        exit 1
    fi
    PY=$("$UV" python find "$WANT_PYTHON")
}}

shell_var() {{  # evaluate a shell_vars snippet; the value goes to a file, never to output
    local value
    if ! value=$(bash -c "$2" 2>"$POOL/shell_var.err"); then
        echo "::failed shell_vars 1"; echo "::command $2"; tail -n 20 "$POOL/shell_var.err"; exit 1
    fi
    printf '%s\0%s\0' "$1" "$value" >> "$POOL/shell_vars"
}}

plugin_op() {{  # a plugin's bootstrap op: in the pool's work dir, the node's venv active
    local out rc
    out=$(cd "$POOL/work" && VIRTUAL_ENV="$ENV/venv" PATH="$ENV/venv/bin:$PATH" bash -c "$2" 2>&1); rc=$?
    if [ $rc -ne 0 ]; then
        echo "::failed plugins $rc"
        echo "::command [plugin $1] $2"
        printf '%s\n' "$out" | tail -n 80
        exit 1
    fi
}}

# where skyward is and what must match the client (providers/ssh/versions.py), in one start
REPORT='import importlib.util as u, json, runpy
site = u.find_spec("skyward").submodule_search_locations[0]
print("::site " + site)
print("::versions " + json.dumps(runpy.run_path(site + "/providers/ssh/versions.py")["report"]()))'
REPORTED="$ENV/.report"

report() {{  # kept beside the env, a Python start fewer per open, until the env changes:
    local site=""  # a package installed there (its metadata is new), a file of skyward's
    [ -s "$REPORTED" ] && read -r _ site < "$REPORTED"
    if [ ! -d "$site" ] || [ -n "$(find "${{site%/*}}" -maxdepth 1 -name '*.dist-info' -newer "$REPORTED" -print -quit
                                  find "$site" -name '*.py' -newer "$REPORTED" -print -quit)" ]; then
        "$VPY" -c "$REPORT" > "$REPORTED.new" || exit 1
        mv "$REPORTED.new" "$REPORTED"
    fi
    while IFS= read -r line; do printf '%s\n' "$line"; done < "$REPORTED"
}}

finish() {{
    touch "$ENV/.ready"
    report
    echo "::ready $ENV"
}}

rm -f "$POOL/shell_vars"
touch "$POOL/shell_vars"
"""
