"""Spec, Nodes, Image, Worker, Options: defaults and validation messages."""

from __future__ import annotations

import pytest

import skyward as sky


def test_defaults_match_the_reference() -> None:
    spec = sky.Spec(provider=sky.Local())
    assert spec.nodes == sky.Nodes(desired=1)
    assert spec.allocation == "spot-if-available"
    assert spec.ttl == 600
    assert spec.image == sky.Image()
    options = sky.Options()
    assert options.selection == "cheapest"
    assert options.default_compute_timeout == 300.0
    assert options.shutdown_timeout == 120.0
    assert options.console is True and options.logging is True and options.cluster is None
    worker = sky.Worker()
    assert (worker.concurrency, worker.buffer, worker.executor, worker.reuse_processes) == (1, 0, "auto", True)
    assert worker.resolved_executor == "thread"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4, sky.Nodes(4)), ((2, 8), sky.Nodes(desired=2, max=8)), (sky.Nodes(8, min=4), sky.Nodes(8, min=4))],
)
def test_node_specs_normalise(value: object, expected: sky.Nodes) -> None:
    assert sky.Spec(provider=sky.Local(), nodes=value).nodes == expected


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: sky.Nodes(desired=-1), "Nodes.desired=-1"),
        (lambda: sky.Nodes(desired=4, min=5), "Nodes.min=5"),
        (lambda: sky.Nodes(desired=4, max=2), "Nodes.max=2"),
        (lambda: sky.Spec(provider=sky.Local(), nodes="four"), "Spec.nodes='four'"),
        (lambda: sky.Spec(provider=sky.Local(), allocation="always"), "Spec.allocation='always'"),
        (lambda: sky.Spec(provider=sky.Local(), accelerator="A100"), "Spec.accelerator='A100'"),
        (lambda: sky.Spec(provider=sky.Local(), ttl=-1), "Spec.ttl=-1"),
        (lambda: sky.Spec(provider="aws"), "Spec.provider='aws'"),
        (lambda: sky.Worker(concurrency=0), "Worker.concurrency=0"),
        (lambda: sky.Worker(executor="fiber"), "Worker.executor='fiber'"),
        (lambda: sky.Worker(reuse_processes=False), "Worker.reuse_processes=False"),
        (lambda: sky.Options(selection="random"), "Options.selection='random'"),
        (lambda: sky.Options(console="fancy"), "Options.console='fancy'"),
        (lambda: sky.Options(default_compute_timeout=0), "Options.default_compute_timeout=0"),
        (lambda: sky.Options(worker=4), "Options.worker=4"),
        (lambda: sky.Image(python="three"), "Image.python='three'"),
        (lambda: sky.Image(pip="numpy"), "Image.pip='numpy'"),
        (lambda: sky.Image(env={"A": 1}), "Image.env="),
        (lambda: sky.LogConfig(level="LOUD"), "LogConfig.level='LOUD'"),
        (lambda: sky.LogConfig(rotation="often"), "LogConfig.rotation='often'"),
        (lambda: sky.PipIndex(url="not a url"), "PipIndex.url='not a url'"),
    ],
)
def test_bad_values_name_the_field_and_value(build, field: str) -> None:
    with pytest.raises(ValueError) as error:
        build()
    assert field in str(error.value)


def test_lists_become_tuples_and_specs_are_frozen() -> None:
    image = sky.Image(pip=["numpy"], apt=["git"], includes=["src"])
    assert image.pip == ("numpy",) and image.apt == ("git",) and image.includes == ("src",)
    spec = sky.Spec(provider=sky.Local(), nodes=2)
    with pytest.raises(AttributeError):
        spec.nodes = 3  # type: ignore[misc]


def test_accelerator_factories() -> None:
    a100 = sky.accelerators.A100()
    assert (a100.name, a100.memory, a100.count) == ("A100", "80GB", 1)
    assert sky.accelerators.A100(memory="40GB").memory_gb == 40.0
    assert sky.accelerators.H100(count=8).count == 8
    with pytest.raises(ValueError, match="A100.memory='12GB'"):
        sky.accelerators.A100(memory="12GB")
    assert sky.accelerators.Custom("My-GPU", memory="48GB", count=2).name == "My-GPU"


def test_time_helpers() -> None:
    assert sky.time.seconds(5) == 5.0
    assert sky.time.minutes(10) == 600.0
    assert sky.time.hours(2) == 7200.0
    assert sky.time.days(1) == 86400.0


def test_named_pools_name_every_provider(tmp_path, monkeypatch) -> None:
    from skyward.api.config_file import load_named_pool

    config = tmp_path / "skyward.toml"
    config.write_text(
        '[pools.hosts]\nprovider = { type = "ssh", hosts = ["root@10.1.2.3:2222"], user = "ubuntu" }\n'
        '[pools.cluster]\nprovider = { type = "ray", address = "127.0.0.1:6379" }\n'
        '[pools.odd]\nprovider = "moon"\n'
        '[pools.typo]\nprovider = { type = "ssh", hostz = ["a"] }\n'
    )
    monkeypatch.setenv("SKYWARD_CONFIG", str(config))
    assert isinstance(load_named_pool("hosts")[0].provider, sky.SSH)
    assert load_named_pool("cluster")[0].provider.address == "127.0.0.1:6379"
    with pytest.raises(ValueError, match=r"\[pools.odd\] provider='moon': unknown provider 'moon': use one of local, ssh, ray, container, aws, runpod"):
        load_named_pool("odd")
    with pytest.raises(ValueError, match=r"\[pools.typo\] provider: .*hostz"):
        load_named_pool("typo")
