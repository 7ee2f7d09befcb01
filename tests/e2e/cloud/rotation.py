"""Which clouds run their expensive tests (``@pytest.mark.rotated``: pools on the cloud's
machines, the launch check) in this run. Every cloud, except in CI (``CI=true``), where
AWS and ``ROTATING`` others run, chosen by the day of the commit under test (its committer
date, UTC): each day moves the window on by ``ROTATING``, so any ``TURNS`` consecutive days
run every cloud. The day is read from the commit itself, so a shallow clone, a merge or
any number of commits in between pick the same clouds for the same commit; commits of one
day share their clouds. The cheap tests (validate, offers, gc, no capacity) run on every
cloud every time; a test marked ``rotated(single=True)`` (the elastic pool tests, which
AWS has a file of its own for) runs on the day's clouds but AWS. ``SKYWARD_CLOUDS=all``
or ``SKYWARD_CLOUDS=name,name`` forces the set."""

from __future__ import annotations

import functools
import math
import os
import subprocess

import pytest

ALWAYS = "aws"
ROTATING = 2
"""Clouds besides AWS whose rotated tests run in one CI run (a cloud's pool and launch
check cost about a minute there)."""
DAY = 86400
ROTATED_OUT = "rotated out this commit (CI)"
"""How a rotated-out test's skip reason starts after the cloud's name (tests/conftest.py
allows it under CI=true)."""


def turns(clouds: tuple[str, ...]) -> int:
    """How many consecutive days run every one of ``clouds``."""
    return math.ceil((len(clouds) - 1) / ROTATING)


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
    day = commit_day()
    return None if day is None else pick(CLOUDS, day)


def pick(clouds: tuple[str, ...], day: int) -> tuple[str, ...]:
    """AWS and the ``ROTATING`` clouds whose turn ``day`` is: the window moves on by
    ``ROTATING`` a day, so any ``turns(clouds)`` consecutive days run every cloud."""
    others = [name for name in clouds if name != ALWAYS]
    window = turns(clouds)
    start = (day % window) * ROTATING
    picked = {others[(start + i) % len(others)] for i in range(min(ROTATING, len(others)))}
    return tuple(name for name in clouds if name == ALWAYS or name in picked)


def skip_reason(cloud: str, single: bool = False, among: tuple[str, ...] | None = None) -> str | None:
    """Why ``cloud``'s rotated tests do not run; None when they do. A ``single`` test
    (``@pytest.mark.rotated(single=True)``: one AWS has its own file for) runs on the
    chosen clouds but AWS (with ``SKYWARD_CLOUDS`` naming clouds, the first named but AWS).
    ``among`` narrows a single test to the clouds that can run it (the spot tests: the
    clouds that sell spot machines); on a CI day whose clouds include none of them, it
    runs on one of ``among`` picked by the day, so it never goes a day unrun."""
    run = chosen()
    forced = bool(os.environ.get("SKYWARD_CLOUDS", "").strip())
    if run is not None and single:
        others = tuple(name for name in run if name != ALWAYS and (among is None or name in among))
        if forced:
            run = others[:1]
        elif others or not among:
            run = others
        else:
            day = commit_day() or 0
            run = (among[day % len(among)],)
    if run is None or cloud in run:
        return None
    if forced:
        return f"{cloud} not in SKYWARD_CLOUDS; SKYWARD_CLOUDS=all runs it"
    return f"{cloud} {ROTATED_OUT}; SKYWARD_CLOUDS=all runs it"


TAKE_OVERS = 3
"""The kept-cloud-pool tests that take turns (a daemon killed under a DigitalOcean pool, a
Droplet taken back under one, a daemon killed under an AWS pool; two to three minutes each
in CI): one a commit day, all three in any three consecutive days."""


def in_turn(position: int, of: int = TAKE_OVERS) -> pytest.MarkDecorator:
    """A mark that skips the test unless it is its turn: in CI (without
    ``SKYWARD_CLOUDS``) one of ``of`` tests runs, by the commit's day, so any ``of``
    consecutive days run each; everywhere else every one runs."""
    forced = os.environ.get("SKYWARD_CLOUDS", "").strip()
    day = commit_day() if not forced and os.environ.get("CI", "").lower() in ("true", "1") else None
    out = day is not None and day % of != position
    return pytest.mark.skipif(out, reason=f"turn {position} of {of} {ROTATED_OUT}; SKYWARD_CLOUDS=all runs it")


def describe() -> str:
    """One line naming the clouds whose pools run, for the report's header and summary."""
    run = chosen()
    if run is None:
        return "cloud pools: every cloud"
    why = "SKYWARD_CLOUDS" if os.environ.get("SKYWARD_CLOUDS", "").strip() else f"CI rotation, commit day {commit_day()}"
    return f"cloud pools: {', '.join(run)} only ({why}; SKYWARD_CLOUDS=all runs every cloud)"


@functools.cache
def commit_day() -> int | None:
    """The day of this checkout's commit (``day_of``)."""
    return day_of(os.path.dirname(__file__))


def day_of(checkout: str) -> int | None:
    """The day (since 1970-01-01, UTC) of the commit checked out at ``checkout``, by its
    committer date: the same in a full clone and a shallow one. None outside git."""
    try:
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", "log", "-1", "--format=%ct", "HEAD"], cwd=checkout,
            capture_output=True, text=True, timeout=30, check=True,
        )
        return int(done.stdout.strip()) // DAY
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
