"""A head relay raises its soft limit on open files (a lane per node), never above the
hard limit and never lowering it."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from skyward.core.open_files import raise_open_files


def _limits_after(soft: int, hard: int, wanted: int) -> tuple[int, int, int]:
    """In a child whose limits are (``soft``, ``hard``): what ``raise_open_files(wanted)``
    returned and the limits it left."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))\n"
        "from skyward.core.open_files import raise_open_files\n"
        f"now = raise_open_files({wanted})\n"
        "print(now, *resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    got, new_soft, new_hard = map(int, out.split())
    return got, new_soft, new_hard


def test_the_soft_limit_is_raised_to_what_is_wanted_within_the_hard_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard limit here is {hard}")
    assert _limits_after(256, 4096, 2048) == (2048, 2048, 4096)
    assert _limits_after(256, 1024, 2048) == (1024, 1024, 1024), "no further than the hard limit"
    assert _limits_after(3000, 4096, 2048) == (3000, 3000, 4096), "never lowered"


def test_the_head_relay_raises_it_before_anything_else() -> None:
    from skyward.providers.ssh import head_relay

    assert head_relay.raise_open_files is raise_open_files
    source = head_relay.main.__code__.co_names
    assert source[0] == "raise_open_files"
