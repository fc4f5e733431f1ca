"""SCENARIOS.md §1, the eager part of §6 and §7, as written there (§6
without model.hybridize() and the final kiln.jit.trace line, which belong to
the compiler issue)."""
import re

import pytest

import kiln
from kiln import nn


@pytest.fixture
def int_indexing(monkeypatch):
    """§6's dataset reads self.data[i]. Tensor indexing lands with the
    indexing work; until then this stands in for t[int] (select on dim 0)."""
    if not hasattr(kiln.Tensor, "__getitem__"):
        monkeypatch.setattr(kiln.Tensor, "__getitem__",
                            lambda self, i: kiln.select(self, 0, int(i)), raising=False)


def test_scenario_1_imperative(capsys):
    def add(a, b):
        return a + b

    def fancy_func(a, b, c, d):
        e = add(a, b)
        f = add(c, d)
        return add(e, f)

    print(fancy_func(1, 2, 3, 4))                     # 10, plain Python

    x = kiln.randn(1, 512)
    net = nn.Sequential(nn.Linear(512, 256), nn.ReLU(),
                        nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 2))
    y = net(x)                                        # eager: runs op by op
    print(y)                                          # tensor([[...]], grad_fn=...)

    out = capsys.readouterr().out.splitlines()
    assert out[0] == "10"
    assert re.fullmatch(r"tensor\(\[\[ *-?\d+\.\d+, +-?\d+\.\d+\]\], grad_fn=<\w+>\)", out[1])
    assert y.shape == (1, 2)


def test_scenario_6_train_eager(capsys, int_indexing):
    from kiln import optim
    from kiln.utils import data

    kiln.manual_seed(0)

    class MyDataset(data.Dataset):
        def __init__(self):
            self.data = kiln.randn(100, 10)
            self.target = kiln.randint(0, 2, (100,))
        def __getitem__(self, i):  # noqa: E301
            return self.data[i], self.target[i]
        def __len__(self):  # noqa: E301
            return len(self.data)

    class MyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(10, 5)
            self.fc2 = nn.Linear(5, 2)
        def forward(self, x):  # noqa: E301
            return self.fc2(nn.functional.relu(self.fc1(x)))

    model = MyModel()
    opt = optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    loader = data.DataLoader(MyDataset(), batch_size=10, shuffle=True)

    def full_loss():  # the loss over the whole dataset (not part of the scenario)
        with kiln.no_grad():
            return criterion(model(loader.dataset.data), loader.dataset.target).item()
    before = full_loss()

    for epoch in range(10):
        for x, target in loader:
            loss = criterion(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())

    lines = capsys.readouterr().out.splitlines()
    assert [int(line.split()[0]) for line in lines] == list(range(10))
    assert x.shape == (10, 10) and target.shape == (10,)

    # Training lowered the loss over the dataset.
    assert full_loss() < before


def test_scenario_6_loss_decreases_over_longer_training(int_indexing):
    """The same loop, longer and with a fixed model init: the epoch losses go down."""
    from kiln import optim
    from kiln.utils import data

    kiln.manual_seed(1)
    x_all = kiln.randn(100, 10)
    target_all = (kiln.select(x_all, 1, 0) > 0).to(kiln.int64)  # learnable labels
    model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2))
    opt = optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    loader = data.DataLoader(data.TensorDataset(x_all, target_all), batch_size=10, shuffle=True)
    epoch_losses = []
    for _ in range(30):
        total = 0.0
        for x, target in loader:
            loss = criterion(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        epoch_losses.append(total / len(loader))
    assert epoch_losses[-1] < 0.8 * epoch_losses[0], epoch_losses


def test_scenario_7_share_memory_with_numpy():
    import numpy as np
    a = np.ones(3, dtype=np.float32)
    t = kiln.from_numpy(a)     # no copy
    a += 1                     # t sees it: tensor([2., 2., 2.])
    b = t.numpy()              # no copy either

    assert repr(t) == "tensor([2., 2., 2.])"
    assert np.shares_memory(a, b) and b.ctypes.data == a.ctypes.data == t.data_ptr()
    t.add_(1)                  # an in-place edit on the kiln side: NumPy sees it
    t[0] = 7
    np.testing.assert_array_equal(a, [7.0, 3.0, 3.0])
    np.testing.assert_array_equal(b, [7.0, 3.0, 3.0])
