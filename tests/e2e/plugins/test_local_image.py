"""Local pools honour the Image: ``Image.pip`` builds a uv virtual environment keyed by
the Image's content, reused warm by the next pool, in which the agents run (the
client's environment stays as it is); shell_vars are evaluated here; the build is
bounded by ``Image.bootstrap_timeout``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import skyward as sky
from skyward.plugins import Plugin
from skyward.providers.local.env import LocalEnvError
from skyward.providers.ssh.versions import package_digest

QUIET = sky.Options(console=False, logging=False)


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    from local_index import local_index

    with local_index() as url:
        yield url


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@sky.function
def demo_facts() -> dict[str, str | None]:
    import sys

    import skyward_demo

    return {
        "version": skyward_demo.VERSION, "prefix": sys.prefix, "var": os.environ.get("FROM_SHELL"),
        "digest": package_digest(Path(sky.__file__).parent),
    }


def _image(url: str, **extra: object) -> sky.Image:
    return sky.Image(
        pip=["skyward-demo==1.0"], pip_indexes=[sky.PipIndex(url, packages=["skyward-demo"])], **extra,  # type: ignore[arg-type]
    )


def test_image_pip_local_pool_imports_a_package_the_client_lacks(index: str, home: Path) -> None:
    assert importlib.util.find_spec("skyward_demo") is None  # the client does not have it
    phases: list[sky.BootstrapPhase] = []
    image = _image(index, shell_vars={"FROM_SHELL": "echo computed-$((6 * 7))"})
    pool = sky.Compute(nodes=2, image=image, options=QUIET)
    pool.on(sky.BootstrapPhase, phases.append)
    with pool:
        facts = demo_facts() @ pool
    assert [f["version"] for f in facts] == ["1.0", "1.0"]
    assert all(f["var"] == "computed-42" for f in facts)  # Image.shell_vars, evaluated here
    envs = list((home / "envs").iterdir())
    venv = next(p for p in envs if p.is_dir())
    assert all(f["prefix"] == str(venv / "venv") for f in facts)  # the agents run in the venv
    client = package_digest(Path(sky.__file__).parent)
    assert all(f["digest"] == client for f in facts)  # the client's very skyward
    assert list((venv / "venv").glob("lib/python*/site-packages/skyward-*.dist-info"))  # installed from its wheel
    assert importlib.util.find_spec("skyward_demo") is None
    built = (venv / ".ready").stat().st_mtime_ns
    assert any(p.phase == "venv" for p in phases)

    with sky.Compute(nodes=1, image=image, options=QUIET) as pool:  # the same Image: reused warm
        assert (demo_facts() >> pool)["version"] == "1.0"
    assert (venv / ".ready").stat().st_mtime_ns == built
    assert [p for p in (home / "envs").iterdir() if p.is_dir()] == [venv]


def test_local_bootstrap_timeout_stops_a_slow_plugin_op(home: Path) -> None:
    slow = Plugin.create("slow").with_bootstrap(lambda cluster: ("sleep 30",))
    with pytest.raises(LocalEnvError, match="bootstrap_timeout"):
        with sky.Compute(image=sky.Image(bootstrap_timeout=1), plugins=[slow], options=QUIET):
            pass


def test_a_failing_plugin_op_names_the_plugin_and_the_command(home: Path) -> None:
    broken = Plugin.create("broken").with_bootstrap(lambda cluster: ("echo nope >&2; exit 3",))
    with pytest.raises(LocalEnvError, match=r"plugin 'broken' bootstrap op .*exit 3\).*\n.*nope"):
        with sky.Compute(plugins=[broken], options=QUIET):
            pass


def test_apt_stays_refused_on_local_pools() -> None:
    with pytest.raises(ValueError, match="Image.apt"):
        with sky.Compute(image=sky.Image(apt=["git"]), options=QUIET):
            pass
