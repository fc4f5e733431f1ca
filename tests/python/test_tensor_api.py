"""Tensor basics, factories, operators, autograd, grad mode and the mapping
of kiln errors to Python exceptions, checked against PyTorch where it has an
answer."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import kiln


def test_factories():
    assert kiln.zeros(2, 3).shape == (2, 3) and kiln.zeros((2, 3)).dtype == kiln.float32
    assert kiln.ones(4, dtype=kiln.int32).tolist() == [1, 1, 1, 1]
    assert kiln.full((2,), 7).dtype == kiln.int64
    assert kiln.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert kiln.arange(5).tolist() == list(range(5)) and kiln.arange(5).dtype == kiln.int64
    assert kiln.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert kiln.linspace(0, 1, 5).tolist() == torch.linspace(0, 1, 5).tolist()
    assert kiln.eye(2, 3).tolist() == torch.eye(2, 3).tolist()
    assert kiln.tensor([[1, 2], [3, 4]]).dtype == kiln.int64
    assert kiln.tensor([1.0, 2]).dtype == kiln.float32
    assert kiln.tensor(np.zeros(2)).dtype == kiln.float64
    assert kiln.tensor([True, False]).dtype == kiln.bool
    assert kiln.tensor([1, 2], dtype=kiln.float64).dtype == kiln.float64
    x = kiln.randn(3, 4)
    for like in (kiln.zeros_like, kiln.ones_like, kiln.rand_like, kiln.randn_like):
        assert like(x).shape == (3, 4) and like(x).dtype == kiln.float32
    assert kiln.full_like(x, 2.0).tolist()[0] == [2.0] * 4


def test_random_factories_follow_the_seed():
    kiln.manual_seed(7)
    a = [kiln.rand(3).tolist(), kiln.randn(3).tolist(), kiln.randint(0, 10, (5,)).tolist()]
    kiln.manual_seed(7)
    b = [kiln.rand(3).tolist(), kiln.randn(3).tolist(), kiln.randint(0, 10, (5,)).tolist()]
    assert a == b
    r = kiln.randint(3, 6, (1000,)).numpy()
    assert r.min() >= 3 and r.max() <= 5
    assert all(0 <= v < 1 for v in kiln.rand(100).tolist())


def test_repr_is_the_cpp_printing():
    assert repr(kiln.tensor([[1.0, 2.0]])) == "tensor([[1., 2.]])"
    assert repr(kiln.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
    y = kiln.ones(2, requires_grad=True) * 2
    assert repr(y) == "tensor([2., 2.], grad_fn=<MulBackward0>)"
    assert repr(kiln.float32) == "kiln.float32"


@pytest.mark.parametrize("expr", [
    "a + b", "a - b", "a * b", "a / b", "a ** 2", "2 ** b", "-a", "a @ b.transpose(0, 1)",
    "a + 2.5", "3 - a", "2 * a", "1 / b", "a < b", "a <= 0", "a > b", "a >= 0.5", "a == a",
    "a != b",
    "a + b.to(INT64)", "b.to(INT64) * 2", "b.to(INT64) / 2",
])
def test_operators_match_pytorch(expr):
    kiln.manual_seed(0)
    a, b = kiln.randn(3, 4), kiln.rand(3, 4) + 0.5
    got = eval(expr, {"a": a, "b": b, "INT64": kiln.int64})
    ta, tb = torch.from_numpy(a.numpy()), torch.from_numpy(b.numpy())
    want = eval(expr, {"a": ta, "b": tb, "INT64": torch.int64})
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]


def test_backward_matches_pytorch():
    x_np = np.random.RandomState(0).standard_normal((3, 4)).astype(np.float32)
    w_np = np.random.RandomState(1).standard_normal((4, 2)).astype(np.float32)
    x, w = kiln.tensor(x_np, requires_grad=True), kiln.tensor(w_np, requires_grad=True)
    loss = (kiln.tanh(x @ w) ** 2).sum()
    assert loss.requires_grad and not loss.is_leaf and x.grad is None
    loss.backward()
    tx = torch.tensor(x_np, requires_grad=True)
    tw = torch.tensor(w_np, requires_grad=True)
    (torch.tanh(tx @ tw) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    x.grad = None
    assert x.grad is None


def test_backward_with_a_gradient_and_detach():
    x = kiln.ones(3, requires_grad=True)
    y = x * 3
    y.backward(kiln.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [3.0, 6.0, 9.0]
    d = y.detach()
    assert not d.requires_grad and d.tolist() == [3.0, 3.0, 3.0]


def test_no_grad_as_context_and_decorator():
    x = kiln.ones(2, requires_grad=True)
    with kiln.no_grad():
        assert not (x * 2).requires_grad
        with kiln.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @kiln.no_grad()
    def double(t):
        return t * 2

    assert not double(x).requires_grad and kiln.is_grad_enabled()


@pytest.mark.parametrize("action,exception,message", [
    (lambda: kiln.ones(2, 3) + kiln.ones(4), RuntimeError,
     "add: shapes [2, 3] and [4] cannot be broadcast"),
    (lambda: kiln.dispatch("no_such_op", [], {}), ValueError, "unknown op 'no_such_op'"),
    (lambda: kiln.ones(2, 3).transpose(0, 5), IndexError, "out of range"),
    (lambda: kiln.ones(2).item(), RuntimeError, "a tensor with 2 elements cannot be converted"),
    (lambda: kiln.ones(2, dtype=kiln.int64).requires_grad_(), RuntimeError, "floating"),
])
def test_errors_map_to_python_exceptions(action, exception, message):
    with pytest.raises(exception) as info:
        action()
    assert message in str(info.value)


def test_error_kinds_match_pytorch():
    """The same mistake raises the same Python exception type in kiln and PyTorch."""
    cases = [
        (lambda m: m.ones(2, 3).transpose(0, 5)),
        (lambda m: m.ones(2, 3) + m.ones(4)),
        (lambda m: m.ones(2, 3).reshape([4, 2])),
    ]
    for case in cases:
        with pytest.raises(Exception) as torch_error:
            case(torch)
        with pytest.raises(Exception) as kiln_error:
            case(kiln)
        assert type(kiln_error.value) is type(torch_error.value), str(kiln_error.value)


@pytest.mark.parametrize("shape", [(2**32, 2**32), (2**62,), (2**61, 4), (2**50,)])
def test_sizes_past_memory_raise_as_in_pytorch(shape):
    # Regression: these wrapped the element or byte count and made a tensor
    # whose storage was smaller than its shape (writes ran past it).
    with pytest.raises(RuntimeError) as torch_error:
        torch.empty(*shape)
    with pytest.raises(RuntimeError) as kiln_error:
        kiln.empty(*shape)
    assert "overflow" in str(torch_error.value) or "allocate" in str(torch_error.value)
    assert "int64" in str(kiln_error.value) or "memory" in str(kiln_error.value)


def test_import_from_the_venv_prints_a_tensor():
    out = subprocess.run([sys.executable, "-c", "import kiln; print(kiln.randn(2, 3))"],
                         capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.startswith("tensor([[") and out.stdout.count("\n") == 2
    assert kiln.__version__ == "0.1.0"


def test_op_functions_and_methods_take_pytorch_arguments():
    x_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    x, tx = kiln.tensor(x_np), torch.tensor(x_np)
    checks = [
        (x.sum(), tx.sum()),
        (x.sum(1), tx.sum(1)),
        (x.sum(dim=0, keepdim=True), tx.sum(dim=0, keepdim=True)),
        (x.mean(dim=(0, 1)), tx.mean(dim=(0, 1))),
        (x.view(3, 2), tx.view(3, 2)),
        (x.reshape([-1]), tx.reshape([-1])),
        (x.permute(1, 0), tx.permute(1, 0)),
        (x.transpose(0, 1), tx.transpose(0, 1)),
        (kiln.softmax(x, 1), torch.softmax(tx, 1)),
        (kiln.cat([x, x], 0), torch.cat([tx, tx], 0)),
        (kiln.relu(x - 2), torch.relu(tx - 2)),
        (x.max(1)[0], tx.max(1)[0]),
    ]
    for got, want in checks:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="extra positional arguments"):
        kiln.relu(x, 1)


def test_every_user_op_is_a_kiln_function():
    from kiln._ops import _GRAPH_ONLY  # the collectives DDP records: kiln.distributed's calls
    assert _GRAPH_ONLY <= {name for name, *_ in kiln._C.op_schemas()}
    for name, *_ in kiln._C.op_schemas():
        if name in _GRAPH_ONLY:
            assert not hasattr(kiln, name), name
        elif not name.endswith("_backward"):
            assert callable(getattr(kiln, name)), name


def test_memory_stats_and_the_cache_of_large_blocks():
    kiln.release_cached_memory()
    assert kiln.memory_stats()["cached_bytes"] == 0
    live = kiln.memory_stats()["live_bytes"]
    big = kiln.empty(1 << 16)  # 256 KiB
    assert kiln.memory_stats()["live_bytes"] == live + (1 << 18)
    del big
    stats = kiln.memory_stats()
    assert stats["live_bytes"] == live and stats["cached_bytes"] >= 1 << 18
    hits = stats["cache_hits"]
    again = kiln.empty(1 << 16)
    assert kiln.memory_stats()["cache_hits"] == hits + 1
    del again
    kiln.release_cached_memory()
    assert kiln.memory_stats()["cached_bytes"] == 0
