"""kiln.utils.data: Dataset, TensorDataset, DataLoader."""
import random

import numpy as np
import pytest

import kiln
from kiln.utils import data


def _dataset(n=10):
    x = kiln.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    y = kiln.tensor(np.arange(n))
    return data.TensorDataset(x, y)


def test_tensor_dataset():
    ds = _dataset()
    assert len(ds) == 10
    x, y = ds[2]
    assert x.tolist() == [6.0, 7.0, 8.0] and y.item() == 2
    assert ds[-1][1].item() == 9
    with pytest.raises(IndexError):
        ds[10]
    with pytest.raises(ValueError, match="Size mismatch"):
        data.TensorDataset(kiln.zeros(3, 2), kiln.zeros(4))


def test_loader_in_order_with_last_partial_batch():
    loader = data.DataLoader(_dataset(), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    x, y = batches[0]
    assert x.shape == (4, 3) and y.tolist() == [0, 1, 2, 3]
    assert batches[2][1].tolist() == [8, 9]
    assert len(data.DataLoader(_dataset(), batch_size=4, drop_last=True)) == 2
    assert [b[1].tolist() for b in data.DataLoader(_dataset(), batch_size=4, drop_last=True)] \
        == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shuffle_is_a_seeded_permutation_new_each_epoch():
    loader = data.DataLoader(_dataset(), batch_size=3, shuffle=True, generator=7)
    epoch1 = sum((b[1].tolist() for b in loader), [])
    epoch2 = sum((b[1].tolist() for b in loader), [])
    assert sorted(epoch1) == list(range(10)) and sorted(epoch2) == list(range(10))
    assert epoch1 != epoch2
    again = data.DataLoader(_dataset(), batch_size=3, shuffle=True, generator=random.Random(7))
    assert sum((b[1].tolist() for b in again), []) == epoch1
    # Without a generator the order follows kiln.manual_seed.
    orders = []
    for _ in range(2):
        kiln.manual_seed(3)
        orders.append(sum((b[1].tolist() for b in data.DataLoader(_dataset(), 4, True)), []))
    assert orders[0] == orders[1] and orders[0] != list(range(10))


def test_default_collate_structures():
    batch = data.default_collate([{"a": kiln.ones(2), "b": 1.5}, {"a": kiln.zeros(2), "b": 2.5}])
    assert batch["a"].shape == (2, 2) and batch["b"].tolist() == [1.5, 2.5]
    assert data.default_collate([(1, "x"), (2, "y")])[1] == ["x", "y"]


def test_custom_dataset_subset_and_split():
    class Squares(data.Dataset):
        def __getitem__(self, i):
            return kiln.tensor([float(i * i)])

        def __len__(self):
            return 6

    out = list(data.DataLoader(Squares(), batch_size=6))
    assert out[0].tolist() == [[0.0], [1.0], [4.0], [9.0], [16.0], [25.0]]
    a, b = data.random_split(Squares(), [4, 2], generator=random.Random(0))
    assert len(a) == 4 and len(b) == 2
    seen = sorted(int(a[i].item()) for i in range(4)) + sorted(int(b[i].item()) for i in range(2))
    assert sorted(seen) == [0, 1, 4, 9, 16, 25]
    with pytest.raises(NotImplementedError):
        data.Dataset()[0]
    with pytest.raises(ValueError, match="batch_size"):
        data.DataLoader(Squares(), batch_size=0)


def test_default_collate_gives_torchs_containers():
    import collections

    import torch
    samples = [(kiln.ones(2), 1), (kiln.zeros(2), 2)]
    got = data.default_collate(samples)
    want = torch.utils.data.default_collate([(torch.ones(2), 1), (torch.zeros(2), 2)])
    assert type(got) is type(want) is list
    Pair = collections.namedtuple("Pair", "x y")
    got = data.default_collate([Pair(kiln.ones(1), 3), Pair(kiln.ones(1), 4)])
    assert type(got) is Pair and got.y.tolist() == [3, 4]
