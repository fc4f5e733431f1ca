"""DistributedSampler: each of several processes reads its own share of a
dataset, as torch.utils.data.DistributedSampler.

Every rank draws the same permutation (from seed + epoch), pads it by
repeating its start until it splits evenly (or, with drop_last, cuts the
tail), and keeps every num_replicas-th index from its rank on. The shuffle
is PyTorch's own: its randperm is a Fisher-Yates walk over MT19937 words
(`word % (n - i)`) seeded with (seed + epoch) mod 2**32, and NumPy's legacy
RandomState is that MT19937 with that seeding, so a job that mixes kiln and
torch ranks, or resumes a torch run, sees the same indices."""
from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from kiln.utils.data.dataset import SizedDataset


def _torch_randperm(n: int, seed: int) -> list[int]:
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed))."""
    order = list(range(n))
    if n < 2:
        return order
    words = np.random.RandomState(seed & 0xFFFFFFFF).randint(0, 2**32, size=n - 1,
                                                              dtype=np.uint32).tolist()
    for i, word in enumerate(words):
        j = i + word % (n - i)
        order[i], order[j] = order[j], order[i]
    return order


def _process_group_size_and_rank(num_replicas: int | None,
                                 rank: int | None) -> tuple[int, int]:
    if num_replicas is not None and rank is not None:
        return num_replicas, rank
    from kiln import distributed
    if num_replicas is None:
        num_replicas = distributed.get_world_size()  # raises without a process group
    if rank is None:
        rank = distributed.get_rank()
    return num_replicas, rank


class DistributedSampler:
    """The indices of `dataset` this rank reads in the current epoch. Call
    set_epoch(e) at the start of each epoch so the shuffle changes with it."""

    def __init__(self, dataset: SizedDataset, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        num_replicas, rank = _process_group_size_and_rank(num_replicas, rank)
        if num_replicas < 1:
            raise ValueError(f"Invalid num_replicas {num_replicas}, num_replicas should be "
                             "at least 1")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        size = len(dataset)
        if drop_last and size % num_replicas != 0:
            # The tail that would not split evenly is left out.
            self.num_samples = math.ceil((size - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(size / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        size = len(self.dataset)
        indices = _torch_randperm(size, self.seed + self.epoch) if self.shuffle \
            else list(range(size))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch the next iteration shuffles for (every rank must
        use the same one)."""
        self.epoch = epoch
