"""Which clouds run their expensive tests (``@pytest.mark.rotated``: pools on the cloud's
machines, the launch check) in this run. Every cloud, except in CI (``CI=true``), where
AWS and ``ROTATING`` others run, taken in turn by the commit's number: each commit moves
the window on, so consecutive commits cover every cloud. The cheap tests (validate,
offers, gc, no capacity) run on every cloud every time; a test marked
``rotated(single=True)`` (the elastic pool tests) runs on one cloud a commit. ``SKYWARD_CLOUDS=all``
or ``SKYWARD_CLOUDS=name,name`` forces the set."""

from __future__ import annotations

import functools
import os
import subprocess

import pytest

ALWAYS = "aws"
ROTATING = 1
"""Clouds besides AWS whose rotated tests run on one CI commit (one keeps the whole run
within CI's time budget; 13 consecutive commits cover every cloud)."""


def chosen() -> tuple[str, ...] | None:
    """The clouds whose rotated tests run; None for every cloud."""
    forced = os.environ.get("SKYWARD_CLOUDS", "").strip()
    if forced == "all" or (not forced and os.environ.get("CI", "").lower() not in ("true", "1")):
        return None
    from e2e.cloud.clouds import CLOUDS

    if forced:
        names = tuple(name.strip() for name in forced.split(",") if name.strip())
        unknown = sorted(set(names) - set(CLOUDS))
        if unknown:
            raise pytest.UsageError(f"SKYWARD_CLOUDS names unknown clouds {unknown}; it takes all or some of {', '.join(CLOUDS)}")
        return names
    number = commit_number()
    return None if number is None else pick(CLOUDS, number)


def pick(clouds: tuple[str, ...], number: int) -> tuple[str, ...]:
    """AWS and the ``ROTATING`` clouds after it whose turn commit ``number`` is: the window
    moves on by ``ROTATING`` a commit, so any ``ceil(others / ROTATING)`` consecutive
    commits run every cloud."""
    others = [name for name in clouds if name != ALWAYS]
    picked = {others[(number * ROTATING + i) % len(others)] for i in range(min(ROTATING, len(others)))}
    return tuple(name for name in clouds if name == ALWAYS or name in picked)


def lead(clouds: tuple[str, ...], number: int) -> str:
    """The one cloud (never AWS) of commit ``number`` for a ``single`` test: the next cloud
    each commit, so consecutive commits cover them all."""
    others = [name for name in clouds if name != ALWAYS]
    return others[number % len(others)]


def skip_reason(cloud: str, single: bool = False) -> str | None:
    """Why ``cloud``'s rotated tests do not run; None when they do. A ``single`` test
    (``@pytest.mark.rotated(single=True)``: one AWS has its own file for) runs on one cloud
    (``lead``; with ``SKYWARD_CLOUDS`` naming clouds, the first named but AWS)."""
    run = chosen()
    if run is not None and single:
        from e2e.cloud.clouds import CLOUDS

        number = None if os.environ.get("SKYWARD_CLOUDS", "").strip() else commit_number()
        run = tuple(name for name in run if name != ALWAYS)[:1] if number is None else (lead(CLOUDS, number),)
    if run is None or cloud in run:
        return None
    if os.environ.get("SKYWARD_CLOUDS", "").strip():
        return f"{cloud} not in SKYWARD_CLOUDS; SKYWARD_CLOUDS=all runs it"
    return f"{cloud} rotated out this commit (CI); SKYWARD_CLOUDS=all runs it"


def describe() -> str:
    """One line naming the clouds whose pools run, for the report's header and summary."""
    run = chosen()
    if run is None:
        return "cloud pools: every cloud"
    why = "SKYWARD_CLOUDS" if os.environ.get("SKYWARD_CLOUDS", "").strip() else f"CI rotation, commit #{commit_number()}"
    return f"cloud pools: {', '.join(run)} only ({why}; SKYWARD_CLOUDS=all runs every cloud)"


@functools.cache
def commit_number() -> int | None:
    """This checkout's commit as a number: how many commits lead to it (consecutive
    commits, consecutive numbers), or its hash in a shallow clone, whose count is its
    depth; None outside a git checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=os.path.dirname(__file__),
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.strip()

    try:
        if git("rev-parse", "--is-shallow-repository") == "true":
            return int(git("rev-parse", "HEAD")[:7], 16)
        return int(git("rev-list", "--count", "HEAD"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
