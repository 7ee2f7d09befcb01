"""A client whose skyward is an installed (non-editable) package, not a checkout, runs
an SSH pool: the nodes get that very copy (written into a wheel from its installed
files), and ``Image.pip`` from an index only the client can reach is resolved on the
client and shipped to the hosts."""

from __future__ import annotations

import functools
import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SHIPPED
from hosts import HostLab, available
from installed_copy import installed_venv
from local_index import PACKAGE, local_index

import skyward
from skyward.providers.ssh.versions import package_digest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
WHEEL_CACHE = Path("~/.skyward/wheels").expanduser()
MARKER = "_installed_copy"
"""A module only the installed copy has: nodes importing it run that copy, not the checkout."""


@dataclass(frozen=True)
class InstalledClient:
    python: str
    site_packages: str
    token: str
    digest: str
    """skyward's package digest of the installed copy (differs from the checkout's)."""


CHECKOUT = Path(skyward.__file__).resolve().parent
"""The skyward this suite runs: the checkout's, or an installed copy's (scripts/test.sh's
remote stream)."""


@pytest.fixture(scope="module")
def installed() -> Iterator[InstalledClient]:
    """A venv with skyward installed by pip from a copy of the one this suite runs, with a
    module of its own (``MARKER``), NON-editable (tests/installed_copy.py)."""
    root = tempfile.mkdtemp(prefix="skyward-installed-")
    digest = ""
    try:
        source = os.path.join(root, "src")
        os.makedirs(source)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / name, source)
        shutil.copytree(CHECKOUT, os.path.join(source, "skyward"), ignore=shutil.ignore_patterns("__pycache__"))
        token = secrets.token_hex(8)
        with open(os.path.join(source, "skyward", f"{MARKER}.py"), "w") as f:
            f.write(f'TOKEN = "{token}"\n')
        venv = installed_venv(source, os.path.join(root, "venv"))
        digest = package_digest(Path(venv.site_packages) / "skyward")
        assert digest != package_digest(CHECKOUT)
        yield InstalledClient(venv.python, venv.site_packages, token, digest)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if digest:  # the wheel the client wrote of this one-off copy
            shutil.rmtree(WHEEL_CACHE / f"skyward-{digest}", ignore_errors=True)


@pytest.fixture(scope="module")
def http_index() -> Iterator[str]:
    """The on-disk index served over HTTP on the client's 127.0.0.1 (a free port), which
    the hosts cannot reach."""
    with local_index() as url:
        root = url.removeprefix("file://").removesuffix("/simple")

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=root))
        thread = threading.Thread(target=server.serve_forever, name="test-index", daemon=True)
        thread.start()
        started = time.time()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/simple"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
            _forget_wheelhouses(PACKAGE, since=started)


def _forget_wheelhouses(requirement: str, since: float) -> None:
    """Remove the client's wheelhouses of ``requirement`` made since ``since``: each run's
    index has a new port, so each run resolved into a new one."""
    for house in WHEEL_CACHE.glob("deps-*"):
        try:
            made = (house / ".complete").stat().st_mtime
            if made >= since and (house / ".complete").read_text().split() == [requirement]:
                shutil.rmtree(house, ignore_errors=True)
        except OSError:
            continue


@pytest.fixture(scope="module")
def fresh_lab() -> Iterator[HostLab]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(3) as lab:
        yield lab


CLIENT = """
import json, os, sys
import skyward as sky
from skyward.providers.ssh import versions

config = json.loads(sys.argv[1])

@sky.function
def square(x):
    return x * x

@sky.function
def inside():
    import os
    import skyship
    import skyward
    import skyward_demo
    from skyward import {marker} as marker
    from skyward.providers.ssh import versions
    return {{
        "node": sky.instance_info().node, "file": skyward.__file__, "versions": versions.report(),
        "marker": marker.TOKEN, "demo": skyward_demo.VERSION, "shipped": skyship.double(21),
        "env": os.environ.get("SKY_INSTALLED", ""),
    }}

provider = sky.SSH(hosts=config["hosts"], key_path=config["key"], known_hosts=config["known_hosts"])
image = sky.Image(
    pip=[config["package"]], pip_indexes=[sky.PipIndex(config["index"], packages=[config["package"]])],
    env={{"SKY_INSTALLED": "yes"}}, includes=[config["shipped"]],
)
pool = sky.Compute(provider=provider, nodes=3, image=image, options=sky.Options(console=False, logging=False))
phases = []
pool.on(sky.BootstrapPhase, lambda event: phases.append(event.phase))
with pool:
    out = {{
        "one": square(7) >> pool,
        "all": square(7) @ pool,
        "pair": list((square(3) & square(4)) >> pool),
        "future": (square(12) > pool).result(),
        "map": pool.map(square, range(100)),
        "inside": inside() @ pool,
    }}
out.update(pool_id=pool.id, phases=phases, client_file=sky.__file__, client=versions.report())
print("RESULT " + json.dumps(out), flush=True)
"""


def test_installed_client_ships_itself_and_resolves_pip(
    installed: InstalledClient, http_index: str, fresh_lab: HostLab, tmp_path: Path
) -> None:
    """The quickstart on 3 fresh hosts from a non-editable install: nodes run the installed
    copy (same digest, its extra module present), ``skyward-demo`` from an index only the
    client reaches arrives (phase ``pip-resolved-on-client``), env and includes are seen;
    nothing of the pool is left on the hosts after."""
    script = tmp_path / "client.py"
    script.write_text(CLIENT.format(marker=MARKER))
    config = {
        "hosts": fresh_lab.strings(), "key": fresh_lab.client_key, "known_hosts": fresh_lab.known_hosts,
        "index": http_index, "package": PACKAGE, "shipped": SHIPPED,
    }
    result = subprocess.run(
        [installed.python, str(script), json.dumps(config)], capture_output=True, text=True, timeout=300,
        cwd=tmp_path,
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT ")), "")
    assert result.returncode == 0 and line, f"the client failed:\n{result.stdout[-3000:]}{result.stderr[-5000:]}"
    out = json.loads(line.removeprefix("RESULT "))
    digest = out["client"]["skyward_digest"]
    assert digest == installed.digest, "the client's digest is not that of the installed copy"
    assert out["client_file"].startswith(installed.site_packages), out["client_file"]
    assert out["one"] == 49 and out["all"] == [49, 49, 49] and out["pair"] == [9, 16]
    assert out["future"] == 144 and out["map"] == [x * x for x in range(100)]
    assert "pip-resolved-on-client" in out["phases"], out["phases"]

    seen = sorted(out["inside"], key=lambda s: s["node"])
    assert [s["node"] for s in seen] == [0, 1, 2]
    for s in seen:
        assert s["marker"] == installed.token, "a node runs another skyward than the installed copy"
        assert s["versions"]["skyward_digest"] == digest, (s["versions"], out["client"])
        assert s["versions"] == out["client"]
        assert "/.cache/skyward/envs/" in s["file"] and not s["file"].startswith(str(REPO)), s["file"]
        assert (s["demo"], s["shipped"], s["env"]) == ("1.0", 42, "yes")

    assert fresh_lab.leftovers() == {}, "processes of the pool still run on the hosts"
    marker = f"skyward-{out['pool_id'][:12]}"
    assert [n for h in fresh_lab.hosts for n in os.listdir(h.private("/tmp")) if marker in n] == []
