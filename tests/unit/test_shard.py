"""sky.shard: type preservation, alignment, disjoint and complete slices."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import skyward as sky


def test_strided_slices_keep_the_type() -> None:
    assert sky.shard(list(range(10)), node=1, total_nodes=4) == [1, 5, 9]
    assert sky.shard(tuple(range(10)), node=0, total_nodes=4) == (0, 4, 8)
    assert sky.shard(range(10), node=2, total_nodes=4) == range(2, 10, 4)
    assert sky.shard("abcdefgh", node=1, total_nodes=2) == "bdfh"
    array = sky.shard(np.arange(10), node=3, total_nodes=4)
    assert isinstance(array, np.ndarray) and array.tolist() == [3, 7]


def test_several_arrays_share_indices() -> None:
    x, y = sky.shard(np.arange(12), [f"y{i}" for i in range(12)], shuffle=True, seed=7, node=1, total_nodes=3)
    assert [f"y{v}" for v in x.tolist()] == y


def test_drop_last_gives_equal_counts() -> None:
    sizes = {len(sky.shard(list(range(10)), drop_last=True, node=n, total_nodes=4)) for n in range(4)}
    assert sizes == {2}


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="node= and total_nodes="):
        sky.shard([1, 2, 3])
    with pytest.raises(ValueError, match="different lengths"):
        sky.shard([1, 2], [1, 2, 3], node=0, total_nodes=1)
    with pytest.raises(ValueError, match="node=4"):
        sky.shard([1], node=4, total_nodes=4)
    with pytest.raises(TypeError, match="sequences"):
        sky.shard(42, node=0, total_nodes=1)


@given(
    st.lists(st.integers(), max_size=60),
    st.integers(min_value=1, max_value=7),
    st.booleans(),
    st.integers(min_value=0, max_value=3),
)
def test_slices_are_disjoint_and_complete(items: list[int], total: int, shuffle: bool, seed: int) -> None:
    tagged = list(enumerate(items))
    parts = [sky.shard(tagged, shuffle=shuffle, seed=seed, node=n, total_nodes=total) for n in range(total)]
    seen = [pair for part in parts for pair in part]
    assert sorted(seen) == tagged


def test_torch_tensors_when_installed() -> None:
    torch = pytest.importorskip("torch")
    part = sky.shard(torch.arange(10), shuffle=True, seed=1, node=0, total_nodes=2)
    assert isinstance(part, torch.Tensor) and len(part) == 5


def test_shuffle_without_a_seed_needs_a_pool() -> None:
    with pytest.raises(ValueError, match="pass seed="):
        sky.shard([1, 2, 3], shuffle=True, seed=None, node=0, total_nodes=2)
