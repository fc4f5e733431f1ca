"""Pieces of PyTorch's surface that the programs of examples/pytorch reach
for, each compared with torch: Tensor.data, all/any, einsum's two operand
forms, bmm, outer, logsumexp (forward and gradient), square, unbind,
broadcast_to and the small predicates."""
import numpy as np
import pytest
import torch

import kiln


def pair(array, requires_grad=False):
    array = np.asarray(array)
    return (kiln.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def test_data_writes_into_the_parameter_without_autograd():
    weight = kiln.nn.Parameter(kiln.zeros(2, 3))
    data = weight.data
    assert not data.requires_grad and weight.requires_grad
    data.fill_(2.0)
    np.testing.assert_array_equal(weight.detach().numpy(), np.full((2, 3), 2.0))
    weight.data.uniform_(-0.1, 0.1)  # the nn.init idiom of older code
    assert np.all(np.abs(weight.detach().numpy()) <= 0.1)
    assert weight.is_leaf and weight.grad is None


def test_assigning_data_copies_the_values_and_keeps_the_parameter():
    layer = kiln.nn.Linear(3, 2)
    new = np.arange(6, dtype=np.float32).reshape(2, 3)
    layer.weight.data = kiln.from_numpy(new)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), new)
    assert layer.weight.requires_grad
    layer(kiln.ones(1, 3)).sum().backward()
    np.testing.assert_array_equal(layer.weight.grad.numpy(), np.ones((2, 3)))


def test_assigning_data_of_another_shape_says_why_it_cannot():
    weight = kiln.nn.Parameter(kiln.zeros(2, 3))
    with pytest.raises(RuntimeError, match=r"needs x's shape \[2, 3\].*got \[3, 2\]"):
        weight.data = kiln.zeros(3, 2)
    with pytest.raises(TypeError, match="must be a Tensor"):
        weight.data = np.zeros((2, 3))


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_all_and_any_as_torch(name, dtype):
    array = np.array([[1, 0, 2], [3, 4, 5], [0, 0, 0]]).astype(dtype)
    ours, theirs = pair(array)
    for args, kwargs in [((), {}), ((1,), {}), ((0,), {"keepdim": True}), ((), {"dim": -1})]:
        got = getattr(kiln, name)(ours, *args, **kwargs)
        want = getattr(torch, name)(theirs, *args, **kwargs)
        assert got.dtype == kiln.bool
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(getattr(ours, name)(*args, **kwargs).numpy(), want.numpy())


def test_einsum_takes_operands_as_arguments_or_as_a_list():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    (ka, ta), (kb, tb) = pair(a, True), pair(b, True)
    got, want = kiln.einsum("bij,bjk->bik", ka, kb), torch.einsum("bij,bjk->bik", ta, tb)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(kiln.einsum("bij,bjk->bik", [ka, kb]).detach().numpy(),
                               want.detach().numpy(), rtol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(ka.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    assert not hasattr(kiln.Tensor, "einsum")  # a function only, as in torch


def test_bmm_and_outer():
    rng = np.random.default_rng(1)
    (ka, ta), (kb, tb) = pair(rng.normal(size=(3, 2, 4))), pair(rng.normal(size=(3, 4, 5)))
    np.testing.assert_allclose(kiln.bmm(ka, kb).numpy(), torch.bmm(ta, tb).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ka.bmm(kb).numpy(), ta.bmm(tb).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="bmm: both arguments must be 3-D, got 2-D and 3-D"):
        kiln.bmm(ka[0], kb)
    (ku, tu), (kv, tv) = pair([1.0, 2.0, 3.0]), pair([4.0, 5.0])
    np.testing.assert_array_equal(kiln.outer(ku, kv).numpy(), torch.outer(tu, tv).numpy())
    with pytest.raises(RuntimeError, match="outer: both arguments must be 1-D"):
        kiln.outer(ka, kv)


@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), ((0, 2), False), (0, True)])
def test_logsumexp_forward_and_gradient(dim, keepdim):
    array = np.random.default_rng(2).normal(size=(3, 4, 5)) * 30  # exp would overflow
    ours, theirs = pair(array, True)
    got, want = kiln.logsumexp(ours, dim, keepdim), torch.logsumexp(theirs, dim, keepdim)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    weights = np.random.default_rng(3).normal(size=tuple(want.shape))
    (got * kiln.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-12)


def test_logsumexp_of_an_all_minus_infinity_row_is_minus_infinity():
    array = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], dtype=np.float32)
    ours, theirs = pair(array)
    np.testing.assert_array_equal(ours.logsumexp(1).numpy(), torch.logsumexp(theirs, 1).numpy())


def test_square_unbind_broadcast_to():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    ours, theirs = pair(array)
    np.testing.assert_array_equal(kiln.square(ours).numpy(), torch.square(theirs).numpy())
    np.testing.assert_array_equal(ours.square().numpy(), theirs.square().numpy())
    for dim in (0, 1, -1):
        got, want = kiln.unbind(ours, dim), torch.unbind(theirs, dim)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(kiln.broadcast_to(ours[:1], (4, 3)).numpy(),
                                  torch.broadcast_to(theirs[:1], (4, 3)).numpy())


def test_predicates():
    x = kiln.zeros(2, 3)
    assert kiln.is_tensor(x) and not kiln.is_tensor(np.zeros(2))
    assert kiln.numel(x) == 6 and isinstance(kiln.numel(x), int)
    assert kiln.is_floating_point(x) and x.double().is_floating_point()
    assert not kiln.is_floating_point(x.long()) and not x.bool().is_floating_point()


def test_masked_fill_in_place_returns_the_tensor_and_keeps_gradients():
    rng = np.random.default_rng(4)
    array, mask = rng.normal(size=(3, 4)), rng.random((3, 4)) > 0.5
    ours, theirs = pair(array, True)
    k_out, t_out = ours * 2, theirs * 2
    assert k_out.masked_fill_(kiln.tensor(mask), -1.0) is k_out
    t_out.masked_fill_(torch.tensor(mask), -1.0)
    np.testing.assert_array_equal(k_out.detach().numpy(), t_out.detach().numpy())
    (k_out * kiln.tensor(array)).sum().backward()
    (t_out * torch.tensor(array)).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_clip_and_the_matrix_products_with_their_dimension_checks():
    rng = np.random.default_rng(5)
    (km, tm), (kv, tv) = pair(rng.normal(size=(3, 4))), pair(rng.normal(size=4))
    np.testing.assert_array_equal(kiln.clip(km, -0.5, 0.5).numpy(),
                                  torch.clip(tm, -0.5, 0.5).numpy())
    np.testing.assert_array_equal(km.clone().clip_(max=0.1).numpy(),
                                  tm.clone().clip_(max=0.1).numpy())
    np.testing.assert_allclose(kiln.mm(km, km.t()).numpy(), torch.mm(tm, tm.t()).numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(km.mv(kv).numpy(), tm.mv(tv).numpy(), rtol=1e-6)
    np.testing.assert_allclose(kiln.dot(kv, kv).numpy(), torch.dot(tv, tv).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="mm: expected 2-D and 2-D arguments, got 2-D and 1-D"):
        kiln.mm(km, kv)
    with pytest.raises(RuntimeError, match="dot: expected 1-D and 1-D arguments"):
        kiln.dot(km, kv)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops(name):
    (ka, ta), (kb, tb) = pair([0.0, 1.5, -2.0, 0.0]), pair([3, 0, 1, 0])
    got, want = getattr(kiln, name)(ka, kb), getattr(torch, name)(ta, tb)
    assert got.dtype == kiln.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(getattr(ka, name)(kb).numpy(), want.numpy())


def test_dims_moved_swapped_flattened_and_unflattened():
    ours, theirs = pair(np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5))
    cases = [("movedim", (0, -1)), ("movedim", ((0, 1), (3, 0))), ("moveaxis", (1, 2)),
             ("swapaxes", (0, 2)), ("swapdims", (1, -1)), ("ravel", ()),
             ("unflatten", (2, (2, -1))), ("count_nonzero", ()), ("count_nonzero", ((0, 2),))]
    for name, args in cases:
        got, want = getattr(kiln, name)(ours, *args), getattr(torch, name)(theirs, *args)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{name}{args}")
    with pytest.raises(RuntimeError, match="movedim: Invalid source or destination dims"):
        kiln.movedim(ours, (0, 1), 2)
    assert ours.nelement() == theirs.nelement() and ours.ndimension() == theirs.ndimension()


def test_inference_mode_as_context_and_decorator():
    x = kiln.ones(2, requires_grad=True)
    with kiln.inference_mode():
        assert not (x * 2).requires_grad
    with kiln.inference_mode(False):
        assert (x * 2).requires_grad

    @kiln.inference_mode
    def bare():
        return kiln.is_grad_enabled()

    @kiln.inference_mode(mode=False)
    def kept():
        return kiln.is_grad_enabled()

    assert not bare() and kept() and kiln.is_grad_enabled()
    assert kiln.get_default_dtype() == kiln.float32
    assert str(torch.get_default_dtype()) == "torch.float32"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_finfo_as_torch(dtype):
    ours, theirs = kiln.finfo(getattr(kiln, dtype)), torch.finfo(getattr(torch, dtype))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert repr(ours) == repr(theirs)


def test_finfo_default_iinfo_and_their_type_errors():
    assert kiln.finfo().max == torch.finfo().max
    for dtype in ("int32", "int64"):
        ours, theirs = kiln.iinfo(getattr(kiln, dtype)), torch.iinfo(getattr(torch, dtype))
        assert (ours.bits, ours.min, ours.max) == (theirs.bits, theirs.min, theirs.max)
    with pytest.raises(TypeError, match="requires a floating point input type"):
        kiln.finfo(kiln.int64)
    with pytest.raises(TypeError, match="requires an integer input type"):
        kiln.iinfo(kiln.float32)
    assert not hasattr(kiln.Tensor, "finfo")


@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(2,), (2, 3), (2, 3, 4)])
def test_meshgrid_as_torch(indexing, sizes):
    pairs = [pair(np.arange(n, dtype=np.float32) * (i + 1)) for i, n in enumerate(sizes)]
    got = kiln.meshgrid(*[k for k, _ in pairs], indexing=indexing)
    want = torch.meshgrid(*[t for _, t in pairs], indexing=indexing)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    listed = kiln.meshgrid([k for k, _ in pairs], indexing=indexing)
    np.testing.assert_array_equal(listed[0].numpy(), want[0].numpy())


def test_tensor_where_takes_the_tensor_where_the_condition_holds():
    x = np.random.default_rng(0).standard_normal(6)
    want = torch.tensor(x).where(torch.tensor(x) > 0, 0.0)
    got = kiln.tensor(x).where(kiln.tensor(x) > 0, 0.0)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_functional_embedding_max_norm_renormalizes_the_rows_it_reads():
    weight = np.random.default_rng(1).standard_normal((5, 3)) * 3
    ids = [[0, 2], [2, 4]]
    tw, kw = torch.tensor(weight), kiln.tensor(weight)
    want = torch.nn.functional.embedding(torch.tensor(ids), tw, max_norm=1.0)
    got = kiln.nn.functional.embedding(kiln.tensor(ids), kw, max_norm=1.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(kw.numpy(), tw.numpy(), rtol=1e-12)  # renormalized in place
