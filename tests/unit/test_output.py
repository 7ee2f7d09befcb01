"""Output control on the client side (no pool)."""

from __future__ import annotations

import skyward as sky


def test_redirect_output_calls_back_per_line() -> None:
    lines: list[str] = []
    with sky.redirect_output(lines.append) as (out, err):
        print("captured")
        print("two\nlines")
        out.write("partial")
    assert lines == ["captured", "two", "lines", "partial"]
    assert isinstance(out, sky.CallbackWriter) and isinstance(err, sky.CallbackWriter)


def test_silent_mutes_even_locally(capsys) -> None:
    @sky.silent
    @sky.function
    def noisy() -> int:
        print("hidden")
        return 1

    assert noisy.local() == 1
    assert capsys.readouterr().out == ""


def test_stdout_only_validates_its_argument() -> None:
    import pytest

    with pytest.raises(ValueError, match='only="head"'):
        sky.stdout(only="tail")
