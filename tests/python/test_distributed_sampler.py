"""utils.data.DistributedSampler against torch.utils.data.DistributedSampler,
index by index (no process group: num_replicas and rank are given)."""
import pytest
import torch.utils.data as tdata

import kiln
from kiln.utils import data

SIZES = [0, 1, 2, 7, 10, 11, 64, 101]
REPLICAS = [1, 2, 3, 4, 8]


def both(size, **kwargs):
    return (data.DistributedSampler(list(range(size)), **kwargs),
            tdata.DistributedSampler(list(range(size)), **kwargs))


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_indices_and_length_equal_torch(size, shuffle, drop_last):
    for replicas in REPLICAS:
        for rank in range(replicas):
            ours, theirs = both(size, num_replicas=replicas, rank=rank, shuffle=shuffle,
                                drop_last=drop_last, seed=3)
            assert len(ours) == len(theirs), (replicas, rank)
            assert list(ours) == list(theirs), (replicas, rank)


def test_set_epoch_changes_the_shuffle_as_torch():
    ours, theirs = both(50, num_replicas=3, rank=1, seed=7)
    seen = []
    for epoch in [0, 1, 2, 10]:
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        assert list(ours) == list(theirs)
        seen.append(list(ours))
    assert seen[0] != seen[1]


def test_large_seed_and_dataset_match_torch():
    ours, theirs = both(5000, num_replicas=4, rank=3, seed=2**33 + 17)
    ours.set_epoch(5)
    theirs.set_epoch(5)
    assert list(ours) == list(theirs)


def test_ranks_cover_the_dataset_once_without_padding():
    size, replicas = 12, 4
    shares = [list(data.DistributedSampler(range(size), num_replicas=replicas, rank=r))
              for r in range(replicas)]
    assert sorted(i for share in shares for i in share) == list(range(size))


def test_padding_repeats_the_start_when_the_dataset_is_smaller_than_the_replicas():
    ours, theirs = both(2, num_replicas=5, rank=4, shuffle=False)
    assert list(ours) == list(theirs) == [0]
    assert len(ours) == 1


@pytest.mark.parametrize("rank", [-1, 3])
def test_rank_outside_the_group_is_refused(rank):
    with pytest.raises(ValueError, match=r"Invalid rank .* interval \[0, 2\]"):
        data.DistributedSampler(range(4), num_replicas=3, rank=rank)


def test_drives_a_dataloader():
    xs = kiln.arange(10, dtype=kiln.float32).reshape(10, 1)
    dataset = data.TensorDataset(xs)
    sampler = data.DistributedSampler(dataset, num_replicas=2, rank=1, shuffle=False)
    rows = [float(v) for (batch,) in data.DataLoader(dataset, batch_size=2, sampler=sampler)
            for v in batch.flatten().tolist()]
    assert rows == [1.0, 3.0, 5.0, 7.0, 9.0]


def test_without_a_process_group_the_sizes_must_be_given():
    if kiln.distributed.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises((RuntimeError, ValueError)):
        data.DistributedSampler(range(4))
