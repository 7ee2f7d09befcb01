"""Regression tests for two bugs of ``ByValueEncoder`` (engine/wire.py), the encoder of
remote pools, found while testing an installed client
(tests/e2e/ssh/test_installed_client.py).

Together they broke every dispatch of a client whose packages live outside its
interpreter's prefix (``pip install --user``, a ``.pth`` or PYTHONPATH naming another
site-packages): requests, which ray imports, registers urllib3's modules under a second
name in sys.modules, and those then count as the user's own modules."""

from __future__ import annotations

import copyreg
import sys
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest

from skyward.engine.wire import ByValueEncoder, decode
from skyward.engine.wire import encode as wire_encode


def _forget(prefix: str) -> None:
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]
    for name in [n for n in cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES if n.startswith(prefix)]:
        cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES.discard(name)


@pytest.fixture
def aliased(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local package that also registers a submodule under a second name, the way
    requests registers ``requests.packages.urllib3.*``."""
    package = tmp_path / "skyaliased"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\nfrom skyaliased import inner\nsys.modules['skyaliased.vendored.inner'] = inner\n"
    )
    (package / "inner.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("skyaliased")
    try:
        yield "skyaliased"
    finally:
        _forget("skyaliased")


def test_a_module_under_two_names_does_not_break_encoding(aliased: str) -> None:
    """Encoding works when a by-value module is also in sys.modules under another name
    (today: ValueError "... is not registered for pickle by value", and the package
    stays registered by value for the rest of the process)."""
    encoder = ByValueEncoder()
    assert decode(encoder(lambda: 41))() == 41
    assert decode(encoder(lambda: 42))() == 42


@pytest.fixture
def foreign_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package installed in a site-packages directory outside this interpreter's
    prefix, put on sys.path the way a ``.pth`` path line or PYTHONPATH does."""
    site = tmp_path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "skyforeign").mkdir(parents=True)
    (site / "skyforeign" / "__init__.py").write_text("def f():\n    return 1\n")
    (site / "skyforeign-1.0.dist-info").mkdir()
    (site / "skyforeign-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: skyforeign\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(site))
    __import__("skyforeign")
    try:
        yield "skyforeign"
    finally:
        _forget("skyforeign")


def test_installed_packages_outside_the_prefix_are_not_shipped_by_value(foreign_site: str) -> None:
    """An installed package (a site-packages directory with its dist-info) is taken by
    reference, like those of the interpreter's own site-packages, not as the user's code."""
    assert ByValueEncoder()._is_local(sys.modules[foreign_site]) is False


def test_code_shipped_by_value_keeps_its_file_name() -> None:
    # cloudpickle 3.1.3 renames shipped code "<dynamic-code>": a remote traceback would then
    # name no file, and the client could not fill in the user's source lines
    namespace: dict[str, object] = {"__name__": "a_script_nobody_can_import"}
    exec(compile("def divide(a, b):\n    return a / b\n", "/home/user/train.py", "exec"), namespace)
    for encode in (ByValueEncoder(), wire_encode):
        shipped = decode(encode(namespace["divide"]))
        assert shipped.__code__.co_filename == "/home/user/train.py"
        assert shipped(6, 3) == 2


def test_a_module_imported_after_a_call_is_shipped_by_value_too(tmp_path, monkeypatch) -> None:
    """The encoder remembers which modules are the client's own between calls, and looks
    again once ``sys.modules`` changed."""
    import importlib
    import sys

    from skyward.engine.wire import ByValueEncoder

    (tmp_path / "late_user_module.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    encoder = ByValueEncoder(())
    assert "late_user_module" not in encoder._local_modules()
    module = importlib.import_module("late_user_module")
    try:
        assert "late_user_module" in encoder._local_modules()
        assert encoder._local_modules() is encoder._local_modules()  # unchanged: not walked again
    finally:
        sys.modules.pop(module.__name__, None)
    assert "late_user_module" not in encoder._local_modules()


def test_a_function_defined_where_there_is_no_module_name_is_shipped_by_value() -> None:
    """Code run in a namespace without ``__name__`` (``code.interact`` with a bare dict,
    ``exec``) makes functions whose ``__module__`` is None; ``sky attach`` failed on them
    with "'NoneType' object has no attribute 'split'"."""
    import skyward as sky

    namespace: dict[str, object] = {"sky": sky}
    exec("@sky.function\ndef shell_made(x):\n    return x + 1\n\nlam = sky.function(lambda: 7)\n", namespace)  # noqa: S102
    for made, expected in ((namespace["shell_made"], 4), (namespace["lam"], 7)):
        assert made.__module__ is None  # type: ignore[attr-defined]
        back = decode(ByValueEncoder()(made))
        assert (back.local(3) if expected == 4 else back.local()) == expected  # type: ignore[attr-defined]


class _Registered:
    def __init__(self, value: int) -> None:
        self.value = value


def _reduce_registered(obj: _Registered) -> tuple[type[_Registered], tuple[int]]:
    return _Registered, (obj.value + 1,)  # marks that this reducer, not the default, ran


def test_a_reducer_registered_with_copyreg_after_a_call_is_used() -> None:
    # the picklers keep copyreg's reducers as one dict (a ChainMap costs every lookup a
    # Python call): a reducer registered, or replaced, after the first call must still apply
    for encode in (ByValueEncoder(), wire_encode):
        assert decode(encode(_Registered(1))).value == 1
        copyreg.pickle(_Registered, _reduce_registered)
        try:
            assert decode(encode(_Registered(1))).value == 2
            copyreg.pickle(_Registered, lambda obj: (_Registered, (obj.value + 10,)))
            assert decode(encode(_Registered(1))).value == 11
        finally:
            del copyreg.dispatch_table[_Registered]
        assert decode(encode(_Registered(1))).value == 1
