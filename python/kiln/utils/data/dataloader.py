"""DataLoader: batches of a map-style dataset, in order or shuffled, collated
by stacking (kiln.stack) in one process."""
from __future__ import annotations

import numbers
import random
from collections.abc import Callable, Iterator
from typing import Any

from kiln import _C, _ops
from kiln._factories import tensor
from kiln.utils.data.dataset import Sampler, SizedDataset


def _permutation(n: int, generator: Any = None) -> list[int]:
    """A permutation of range(n). generator: None (drawn from kiln's default
    generator, so kiln.manual_seed makes it reproducible), a kiln.Generator
    (as in PyTorch), an int seed, or a random.Random."""
    if generator is None or isinstance(generator, _C.Generator):
        return [int(i) for i in _C.randperm(n, _C.dtype.int64, False, generator).tolist()]
    if isinstance(generator, numbers.Integral):
        rng = random.Random(int(generator))
    elif isinstance(generator, random.Random):
        rng = generator
    else:
        raise TypeError("generator: expected None, a kiln.Generator, an int seed or a "
                        f"random.Random, got {type(generator).__name__}")
    order = list(range(n))
    rng.shuffle(order)
    return order


def default_collate(batch: list[Any]) -> Any:
    """Stacks a list of samples: tensors into one tensor with a new first
    dim, numbers into a tensor, and tuples/lists/dicts element by element."""
    first = batch[0]
    if isinstance(first, _C.Tensor):
        return _ops.stack(list(batch), 0)
    if isinstance(first, (bool, numbers.Number)):
        return tensor(list(batch))
    if isinstance(first, str):
        return list(batch)
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(column)) for column in zip(*batch)]
        if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple keeps its type
            return type(first)(*columns)
        return columns  # a list for tuples too, as torch's default_collate gives
    raise TypeError(f"default_collate: batch must contain tensors, numbers, dicts or lists; "
                    f"found {type(first).__name__}")


class DataLoader:
    """for batch in DataLoader(dataset, batch_size=10, shuffle=True): ...

    shuffle draws a new order each epoch, from `generator` (a kiln.Generator,
    an int seed or a random.Random) or else from kiln's default generator
    (kiln.manual_seed)."""

    def __init__(self, dataset: SizedDataset, batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Sampler | None = None, batch_sampler: object = None,
                 num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: object = None, multiprocessing_context: object = None,
                 generator: Any = None) -> None:
        # torch's signature; the multi-process and batch_sampler options are not supported.
        if batch_sampler is not None:
            raise NotImplementedError("kiln's DataLoader: batch_sampler is not supported yet")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if num_workers != 0:
            raise NotImplementedError("kiln's DataLoader loads in one process (num_workers=0)")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, shuffle
        self.drop_last, self.sampler = drop_last, sampler
        self.collate_fn = collate_fn or default_collate
        if isinstance(generator, numbers.Integral):
            generator = random.Random(int(generator))  # one stream over all epochs
        self.generator = generator

    def _indices(self) -> list[int]:
        if self.sampler is not None:
            return list(self.sampler)
        if self.shuffle:
            return _permutation(len(self.dataset), self.generator)
        return list(range(len(self.dataset)))

    def __iter__(self) -> Iterator[Any]:
        indices = self._indices()
        if self.batch_size is None:  # no batching: samples one by one
            for i in indices:
                yield self.dataset[i]
            return
        for start in range(0, len(indices), self.batch_size):
            chunk = indices[start:start + self.batch_size]
            if len(chunk) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn([self.dataset[i] for i in chunk])

    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
