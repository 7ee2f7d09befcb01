"""``sky.DistributedSampler``: this worker's share of a dataset's indices, for a
PyTorch ``DataLoader(sampler=...)``, with no dependency on torch."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sized

from skyward.core.instance import place_in_pool
from skyward.core.validation import check_flag


class DistributedSampler:
    """The indices of ``dataset`` this worker trains on: every ``num_replicas``-th index
    from ``rank`` (defaults: the pool's total workers and this worker's global index),
    after a shuffle shared by every worker (``seed + epoch``: call ``set_epoch`` each
    epoch for a new order). Each worker gets the same count: the tail is padded with the
    first indices, or dropped with ``drop_last``. Outside a task pass both ``num_replicas``
    and ``rank``. Raises TypeError for a dataset without ``len``, ValueError for a bad rank."""

    def __init__(
        self,
        dataset: Sized,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        check_flag("DistributedSampler", "shuffle", shuffle)
        check_flag("DistributedSampler", "drop_last", drop_last)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"DistributedSampler(seed={seed!r}): use an int, the same on every worker")
        try:
            self.length = len(dataset)
        except TypeError:
            raise TypeError(
                f"DistributedSampler needs a dataset with a length (len(dataset)), got {type(dataset).__name__}"
            ) from None
        rank, num_replicas = place_in_pool(
            "DistributedSampler", ("rank", rank), ("num_replicas", num_replicas),
            lambda info: (info.global_worker_index, info.total_workers),
            "DistributedSampler outside a task does not know the workers: pass num_replicas= and rank=, "
            "or create it inside a @sky.function running on a pool",
        )
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        per_worker = self.length // num_replicas if drop_last else math.ceil(self.length / num_replicas)
        self.num_samples = per_worker
        self.total_size = per_worker * num_replicas

    def __iter__(self) -> Iterator[int]:
        indices = list(range(self.length))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        if self.drop_last:
            indices = indices[: self.total_size]
        elif indices:
            indices += (indices * math.ceil(self.total_size / len(indices)))[: self.total_size - len(indices)]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next shuffle (the same value on every worker)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"DistributedSampler.set_epoch({epoch!r}) takes an int >= 0")
        self.epoch = epoch
