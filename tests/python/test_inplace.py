"""In-place operators and methods, small Tensor methods (.T, len, size,
casts), checked against PyTorch: results, identity, aliasing through views,
the version counter and PyTorch's errors."""
import numpy as np
import pytest
import torch

import kiln


def pair(shape=(2, 3), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return kiln.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/="])
@pytest.mark.parametrize("other", ["tensor", "broadcast", "int", "float"])
def test_inplace_operators_match_torch(op, other):
    k, t = pair()
    ko, to_ = {
        "tensor": pair(seed=1),
        "broadcast": pair((3,), seed=2),
        "int": (3, 3),
        "float": (0.5, 0.5),
    }[other]
    k_id, version = id(k), k._version()
    exec(f"k {op} ko; t {op} to_")
    assert id(k) == k_id  # the same object, as in PyTorch
    assert k._version() == version + 1
    np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_"])
def test_inplace_methods_return_self(name):
    k, t = pair()
    ko, to_ = pair(seed=3)
    assert getattr(k, name)(ko) is k
    getattr(t, name)(to_)
    assert getattr(k, name)(2) is k
    getattr(t, name)(2)
    np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-6)


def test_zero_fill_copy():
    k, t = pair()
    assert k.fill_(2.5) is k and k.tolist() == t.fill_(2.5).tolist()
    assert k.zero_() is k and k.tolist() == [[0.0] * 3] * 2
    src = kiln.tensor([1.0, 2.0, 3.0])
    assert k.copy_(src) is k and k.tolist() == [[1.0, 2.0, 3.0]] * 2  # broadcasts
    i = kiln.zeros(3, dtype=kiln.int64)
    i.copy_(kiln.tensor([1.7, 2.2, -3.9]))  # converts the dtype, as torch
    assert i.tolist() == torch.zeros(3, dtype=torch.int64).copy_(
        torch.tensor([1.7, 2.2, -3.9])).tolist()


def test_inplace_writes_are_seen_through_views():
    base = kiln.zeros(2, 3)
    row = base.select(0, 1)
    row += 1
    row.mul_(3)
    assert base.tolist() == [[0, 0, 0], [3, 3, 3]]
    assert base._version() == row._version() == 2
    base.T.fill_(7)
    assert row.tolist() == [7, 7, 7]


def test_inplace_on_int_with_float_raises_like_torch():
    with pytest.raises(RuntimeError):
        torch.zeros(2, dtype=torch.int64).add_(0.5)
    with pytest.raises(RuntimeError):
        kiln.zeros(2, dtype=kiln.int64).add_(0.5)


def test_inplace_on_leaf_requiring_grad_raises():
    t = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf .* requires grad is being used in an in-place"):
        t += 1
    k = kiln.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf .* requires grad is being used in an in-place"):
        k += 1
    with pytest.raises(RuntimeError, match="leaf .* requires grad is being used in an in-place"):
        k.zero_()
    with kiln.no_grad():  # allowed under no_grad, as an optimizer step does
        k -= 0.5
    assert k.tolist() == [0.5, 0.5]


def test_inplace_in_graph_gets_gradient():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y += x
    y.mul_(3)
    y.sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = tx * 2
    ty += tx
    ty.mul_(3)
    ty.sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_requires_grad_():
    k = kiln.zeros(2)
    assert k.requires_grad_() is k and k.requires_grad
    assert k.requires_grad_(False) is k and not k.requires_grad


def test_small_tensor_methods():
    k, t = pair((2, 3, 4))
    assert k.T.shape == tuple(t.permute(2, 1, 0).shape)
    m, tm = pair((2, 3))
    assert m.T.tolist() == tm.T.tolist()
    assert not m.T.is_contiguous()
    assert k.ndim == 3 and len(k) == 2 and k.size(1) == 3 and k.size(-1) == 4
    assert k.numel() == 24 and k.size() == (2, 3, 4)
    c = m.T.contiguous()
    assert c.is_contiguous() and c.tolist() == tm.T.tolist()
    cl = m.clone()
    cl.fill_(0)
    assert m.tolist() == tm.tolist()  # a clone doesn't alias
    assert m.long().dtype == kiln.int64 and m.long().tolist() == tm.long().tolist()
    assert m.long().float().dtype == kiln.float32
    assert m.double().dtype == kiln.float64 and m.int().dtype == kiln.int32
    assert m.bool().tolist() == tm.bool().tolist()
    assert m.to(kiln.float64).dtype == kiln.float64
    assert m.to(kiln.float32)._is_same(m)  # the same dtype: the tensor itself


# Writes whose source shares memory with the destination in another layout.
# Each case: whether torch refuses it, then kiln must refuse it the same way
# (before, kiln wrote scrambled values silently); the rest must equal torch.
OVERLAP_CASES = {
    "copy_from_transpose": lambda m, x: x.copy_(x.t()),
    "add_transpose": lambda m, x: x.add_(x.t()),
    "copy_shifted": lambda m, x: x.view(-1)[1:].copy_(x.view(-1)[:-1]),
    "add_shifted": lambda m, x: x.view(-1)[1:].add_(x.view(-1)[:-1]),
    "write_expanded": lambda m, x: x[0].expand(4, 4).add_(1),
    "add_own_row": lambda m, x: x.add_(x[0]),
    "add_own_element": lambda m, x: x.add_(x[0, 0]),
    "copy_same_view": lambda m, x: x.copy_(x),
    "mul_by_itself": lambda m, x: x.mul_(x),
    "copy_row_to_row": lambda m, x: x[1].copy_(x[0]),
    "copy_column_to_column": lambda m, x: x[:, 1].copy_(x[:, 0]),
}


@pytest.mark.parametrize("case", sorted(OVERLAP_CASES))
def test_overlapping_inplace_writes_match_torch(case):
    write = OVERLAP_CASES[case]
    expected = torch.arange(16.0).reshape(4, 4)
    try:
        write(torch, expected)
        torch_error = None
    except RuntimeError as error:
        torch_error = str(error)
    x = kiln.arange(16.0).reshape(4, 4)
    if torch_error is not None:
        assert "single memory location" in torch_error
        with pytest.raises(RuntimeError, match="memory") as raised:
            write(kiln, x)
        assert "clone()" in str(raised.value)
        np.testing.assert_array_equal(x.numpy(), np.arange(16.0).reshape(4, 4))
        return
    write(kiln, x)
    np.testing.assert_array_equal(x.numpy(), expected.numpy())


def test_overlap_error_names_copy_and_both_layouts():
    x = kiln.arange(16.0).reshape(4, 4)
    with pytest.raises(RuntimeError, match=r"copy_: input 0 \(shape \[4, 4\], strides \[1, 4\]\)"):
        x.copy_(x.t())
