"""A misspelt keyword of ``Compute``, ``Spec`` and ``Options`` (and a skyward.toml key)
is refused naming it, the closest right one, and the pool and its line once."""

from __future__ import annotations

from pathlib import Path

import pytest

import skyward as sky
from skyward.api.config_file import check_file


@pytest.mark.parametrize(
    ("make", "wrong", "meant"),
    [
        (lambda: sky.Compute(keepalive=5), "keepalive=", "keep_alive="),
        (lambda: sky.Compute(nodes=2, consol=False), "consol=", "console="),
        (lambda: sky.Options(keepalive=5), "keepalive=", "keep_alive="),
        (lambda: sky.Spec(sky.Local(), node=2), "node=", "nodes="),
    ],
)
def test_a_misspelt_keyword_names_the_closest_field(make: object, wrong: str, meant: str) -> None:
    with pytest.raises(TypeError) as raised:
        make()  # type: ignore[operator]
    assert f"unknown keyword {wrong} (did you mean {meant}?)" in str(raised.value)


def test_an_unknown_keyword_with_nothing_close_lists_the_fields() -> None:
    with pytest.raises(TypeError, match=r"unknown keyword zzz=; its fields: provider, accelerator, nodes"):
        sky.Spec(sky.Local(), zzz=1)  # type: ignore[call-arg]


def test_the_right_keywords_still_build_copy_and_pickle() -> None:
    import dataclasses
    import pickle

    options = sky.Options(console=False, keep_alive=5)
    assert pickle.loads(pickle.dumps(options)) == options
    assert dataclasses.replace(options, console=True).console is True
    assert sky.Spec(sky.Local(), nodes=2).nodes.desired == 2  # type: ignore[union-attr]


def test_skyward_toml_names_the_pool_the_key_and_its_line_once(tmp_path: Path) -> None:
    path = tmp_path / "skyward.toml"
    path.write_text(
        '[pools.dev]\nprovider = "local"\nnode = 2\n\n'
        '[pools.b]\nprovider = "local"\nnodes = 2\nkeepalive = 3\n\n'
        "[pools.c]\nnodes = 2\n[pools.c.options]\nconsol = false\n"
    )
    shown = [str(problem) for problem in check_file(path)]
    assert shown[0].startswith(f"{path}:3: [pools.dev] Spec() got an unknown keyword node= (did you mean nodes=?)")
    assert shown[1] == (
        f"{path}:8: [pools.b] unknown keyword keepalive= (did you mean keep_alive?): an Options field, "
        "which goes in the [pools.b.options] table"
    )
    assert shown[2].startswith(f"{path}:13: [pools.c.options]: Options() got an unknown keyword consol=")
    assert all(line.count("[pools.") == 1 + line.count("[pools.b.options]") for line in shown), shown


def test_the_reference_type_names_and_the_accelerators_module_are_importable() -> None:
    """The names the reference documents use in type hints, from ``sky``, and
    ``from skyward.accelerators import A100`` as the original allows."""
    from skyward.accelerators import A100, H100

    assert A100().name == "A100" and H100(count=8).count == 8
    assert sky.accelerators.A100 is A100
    for name in ("NodeSpec", "Consistency", "ConsoleMode", "ProviderConfig", "AllocationStrategy", "Architecture",
                 "Credential"):
        assert name in sky.__all__ and getattr(sky, name) is not None, name
