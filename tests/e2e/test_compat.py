"""The three Compute conventions, the older names, Session and MultiPool."""

from __future__ import annotations

import os

import pytest

import skyward as sky

QUIET = sky.Options(console=False, logging=False)


@sky.function
def node() -> int:
    return sky.instance_info().node


@sky.function
def env_value(name: str) -> str | None:
    return os.environ.get(name)


def test_compute_conventions_are_exclusive() -> None:
    with pytest.raises(TypeError, match="either Spec objects or Spec fields"):
        sky.Compute(sky.Spec(provider=sky.Local()), nodes=2)
    assert sky.Compute(name="train", nodes=2).name == "train"  # fields given: name names the pool
    with pytest.raises(TypeError, match="takes a string"):
        sky.Compute(name=3, nodes=2)  # type: ignore[arg-type]
    assert sky.Compute(selection="first", worker=sky.Worker(concurrency=2)).options.worker.concurrency == 2
    with pytest.raises(TypeError, match="selection= beside options="):
        sky.Compute(options=sky.Options(selection="cheapest"), selection="first")
    with pytest.raises(TypeError, match="unknown keyword gpus="):
        sky.Compute(gpus=2)
    with pytest.raises(TypeError, match="positional arguments must be sky.Spec"):
        sky.Compute(sky.Local())


def test_local_refuses_what_it_cannot_provide() -> None:
    for fields, text in [
        ({"accelerator": sky.accelerators.A100()}, "Spec.accelerator"),
        ({"region": "us-east-1"}, "Spec.region"),
        ({"allocation": "spot"}, "Spec.allocation"),
        ({"vcpus": 10_000}, "Spec.vcpus"),
        ({"image": sky.Image(apt=["git"])}, "Image.apt"),
        ({"image": sky.Image(python="2.7")}, "Image.python"),
    ]:
        with pytest.raises(ValueError, match=text):
            with sky.Compute(options=QUIET, **fields):
                pass


def test_explicit_specs_with_fallback_order() -> None:
    specs = (sky.Spec(provider=sky.Local(), nodes=2), sky.Spec(provider=sky.Local(), nodes=3))
    with sky.Compute(*specs, options=sky.Options(selection="first", console=False, logging=False)) as pool:
        assert pool.current_nodes() == 2


def test_a_spec_this_machine_cannot_satisfy_falls_back_to_the_next() -> None:
    errors: list[sky.Error] = []
    specs = (sky.Spec(provider=sky.Local(), vcpus=10_000), sky.Spec(provider=sky.Local(), nodes=2))
    pool = sky.Compute(*specs, options=sky.Options(selection="first", console=False, logging=False))
    pool.on(sky.Error, errors.append)
    with pool:
        assert pool.current_nodes() == 2
    assert len(errors) == 1 and "vcpus" in errors[0].message


def test_when_every_spec_fails_each_reason_is_listed() -> None:
    specs = (
        sky.Spec(provider=sky.Local(), vcpus=10_000),
        sky.Spec(provider=sky.Local(), accelerator=sky.accelerators.A100()),
    )
    with pytest.raises(sky.AllProvidersFailedError, match="none of the 2 Specs") as failure:
        sky.Compute(*specs, options=sky.Options(selection="first", console=False, logging=False)).open()
    notes = "\n".join(failure.value.__notes__)
    assert "1. local: ValueError: Spec.vcpus=10000" in notes and "2. local:" in notes and "accelerator" in notes
    with pytest.raises(ValueError, match="vcpus"):  # one spec: its own error, unwrapped
        sky.Compute(specs[0], options=sky.Options(console=False, logging=False)).open()


def test_named_pool_from_skyward_toml(tmp_path, monkeypatch) -> None:
    config = tmp_path / "skyward.toml"
    config.write_text(
        '[pools.tiny]\nprovider = "local"\nnodes = 2\n'
        '[pools.tiny.image]\nenv = { GREETING = "hello" }\n'
        '[pools.tiny.options]\nconsole = false\nlogging = false\n'
        '[pools.tiny.options.worker]\nconcurrency = 2\n'
    )
    monkeypatch.setenv("SKYWARD_CONFIG", str(config))
    with sky.Compute(name="tiny") as pool:
        assert node() @ pool == [0, 1]
        assert env_value("GREETING") >> pool == "hello"
        assert pool.options.resolved_worker.concurrency == 2
    with pytest.raises(ValueError, match=r"no \[pools.huge\] table"):
        sky.Compute(name="huge")


def test_compute_pool_old_names() -> None:
    events: list[object] = []
    pool = sky.ComputePool(nodes=2, concurrency=2, display="quiet", env={"OLD": "yes"}, on_event=events.append)
    with pool:
        assert pool.is_active and pool.instance_count == 2
        assert pool.run(node()) in (0, 1)
        assert pool.run_batch(node() & node()) in ((0, 1), (1, 0), (0, 0), (1, 1))
        assert pool.broadcast(env_value("OLD")) == ["yes", "yes"]
    assert not pool.is_active
    assert any(isinstance(e, sky.ClusterReady) for e in events)
    with pytest.raises(ValueError, match="display='fancy'"):
        sky.ComputePool(display="fancy")
    with pytest.raises(ValueError, match="Spec.instance_type='p5.48xlarge' is not valid: a local pool"):
        sky.ComputePool(machine="p5.48xlarge").__enter__()


def test_pool_decorator_uses_the_sky_target() -> None:
    @sky.pool(nodes=2, options=QUIET)
    def main() -> list[int]:
        return node() @ sky

    assert main() == [0, 1]

    @sky.pool(nodes=1, display="quiet")
    def old_style() -> int:
        return node() >> sky

    assert old_style() == 0


def test_multipool_and_session() -> None:
    with sky.MultiPool(sky.Compute(nodes=1, options=QUIET), sky.Compute(nodes=2, options=QUIET)) as (one, two):
        assert node() @ one == [0]
        assert node() @ two == [0, 1]
    assert not one.is_active and not two.is_active
    with sky.Session(options=QUIET) as session:
        first = session.compute(nodes=1)
        second = session.compute(nodes=2)
        assert (node() @ first, node() @ second) == ([0], [0, 1])
    assert not first.is_active and not second.is_active
