"""Shared fixtures: real local pools (real Ray, real agent processes)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

import skyward as sky

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def pool4() -> Iterator[sky.Pool]:
    """One 4-node local pool shared by the tests that only dispatch work."""
    with sky.Compute(nodes=4, options=sky.Options(console=False, logging=False)) as pool:
        yield pool


@pytest.fixture(scope="session")
def pool2_concurrent() -> Iterator[sky.Pool]:
    """A 2-node pool with 2 task slots per node."""
    options = sky.Options(console=False, logging=False, worker=sky.Worker(concurrency=2))
    with sky.Compute(nodes=2, options=options) as pool:
        yield pool
