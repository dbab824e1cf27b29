"""``DistributedSampler``: give each rank its own share of a dataset, every epoch.

With ``p`` ranks, rank ``r`` takes indices ``r, r + p, r + 2p, ...`` of the
epoch's order (shuffled with ``seed + epoch``, the same on every rank, so the
shares never overlap). When the dataset does not divide by ``p``, the order is
padded by repeating its first indices (every rank gets the same number of
samples, so no rank waits for a batch that never comes), or, with
``drop_last=True``, cut short. Call ``set_epoch(epoch)`` before each epoch,
or every epoch gets the same order — as in PyTorch.

The order comes from numpy's generator, so the shares are not the same
indices as PyTorch's (which uses ``torch.randperm``); the rules are.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np

from .sampler import Sampler


class DistributedSampler(Sampler):
    """Indices of ``dataset`` for rank ``rank`` of ``num_replicas``.

    Args:
        dataset: anything with ``len()``.
        num_replicas, rank: by default the process group's world size and rank.
        shuffle: a new random order each epoch (seeded by ``seed + epoch``).
        seed: must be the same on every rank.
        drop_last: cut the tail instead of padding it.
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed as dist
            if not dist.is_initialized():
                raise RuntimeError(
                    "DistributedSampler needs num_replicas and rank, or an initialized "
                    "process group. Fix: pass both, or call dist.init_process_group() first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` (call it on every rank at the start of each epoch)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n)
        if self.drop_last:
            order = order[:self.total_size]
        elif self.total_size > n:  # pad by repeating from the start (more than once if tiny)
            repeats = math.ceil((self.total_size - n) / max(n, 1))
            order = np.concatenate([order] + [order] * repeats)[:self.total_size]
        return iter(order[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples
