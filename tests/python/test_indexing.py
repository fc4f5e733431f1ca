"""Indexing and assignment (ints, slices, None, Ellipsis, index tensors,
boolean masks) against PyTorch: values, that basic reads are views, that
writes go through them (and move the version), and PyTorch's errors."""
import numpy as np
import pytest
import torch

import kiln

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

BASIC = [
    0, -1, 1, (0, 1), (1, -1, 2), (0, 1, 2, 3), (-2, -3, -4, -5),
    slice(None), slice(1, 3), slice(None, None, 2), slice(-2, None), slice(-10, 10),
    slice(3, 1), slice(None, -1, 3), (slice(None), slice(1, 3)),
    (slice(None), 0, slice(1, None, 2)),
    None, (None, 0), (0, None, slice(1, 3), None), (Ellipsis, None), (Ellipsis, 0),
    (0, Ellipsis), (0, Ellipsis, 1), (Ellipsis, slice(None, None, 3), None),
    (1, None, Ellipsis, -1),
    Ellipsis, (), np.int64(1), True, (slice(None), False),
]


@pytest.mark.parametrize("index", BASIC, ids=[repr(i) for i in BASIC])
def test_basic_index_reads_a_view(index):
    k, t = kiln.tensor(A), torch.tensor(A)
    kv, tv = k[index], t[index]
    assert kv.shape == tuple(tv.shape)
    np.testing.assert_array_equal(kv.numpy(), tv.numpy())
    if kv.numel() and not isinstance(index, bool):  # a view: writes are seen by the base
        # (torch copies for x[True]; kiln returns a view)
        kv.fill_(-1.0)
        tv.fill_(-1.0)
        np.testing.assert_array_equal(k.numpy(), t.numpy())


@pytest.mark.parametrize("index", BASIC, ids=[repr(i) for i in BASIC])
@pytest.mark.parametrize("kind", ["number", "tensor"])
def test_basic_index_assignment(index, kind):
    k, t = kiln.tensor(A), torch.tensor(A)
    shape = tuple(t[index].shape)
    if kind == "number":
        kval = tval = 7.5
    else:
        v = np.random.default_rng(0).standard_normal(shape[-1:] or ()).astype(np.float32)
        kval, tval = kiln.tensor(v), torch.tensor(v)  # broadcasts over the indexed part
    version = k._version()
    k[index] = kval
    t[index] = tval
    np.testing.assert_array_equal(k.numpy(), t.numpy())
    assert k._version() == version + 1


ADVANCED = [
    [1, 0], [-1, 0, 0], (slice(None), [2, 0]), (0, slice(None), [3, -1, 1]),
    (Ellipsis, [4, 0]), ([[0, 1], [1, 0]],), (slice(1, None), [[2], [0]], slice(None, 3)),
]


def as_index(index, make):
    def one(i):
        return make(i) if isinstance(i, list) else i
    return tuple(one(i) for i in index) if isinstance(index, tuple) else one(index)


@pytest.mark.parametrize("index", ADVANCED, ids=[repr(i) for i in ADVANCED])
def test_index_tensor_read_and_write(index):
    k, t = kiln.tensor(A), torch.tensor(A)
    for make_k in (lambda i: i, lambda i: kiln.tensor(i)):  # a list or an int64 tensor
        kv, tv = k[as_index(index, make_k)], t[as_index(index, torch.tensor)]
        assert kv.shape == tuple(tv.shape)
        np.testing.assert_array_equal(kv.numpy(), tv.numpy())
    kv.fill_(-1.0)  # advanced indexing copies: the base is unchanged
    np.testing.assert_array_equal(k.numpy(), A)
    if isinstance(index, tuple) and any(isinstance(i, list) and isinstance(i[0], list)
                                        for i in index):
        return  # assignment takes a 1-D index tensor
    k[as_index(index, kiln.tensor)] = 3.0
    t[as_index(index, torch.tensor)] = 3.0
    np.testing.assert_array_equal(k.numpy(), t.numpy())
    shape = tuple(t[as_index(index, torch.tensor)].shape)
    v = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    k[as_index(index, kiln.tensor)] = kiln.tensor(v)
    t[as_index(index, torch.tensor)] = torch.tensor(v)
    np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_index_select_gradient():
    x = kiln.tensor(A[0], requires_grad=True)
    tx = torch.tensor(A[0], requires_grad=True)
    (x[:, [0, 2, 2]] * 2).sum().backward()
    (tx[:, [0, 2, 2]] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    y = kiln.tensor(A[0], requires_grad=True)
    ty = torch.tensor(A[0], requires_grad=True)
    (y[1:, None, ::2] ** 2).sum().backward()
    (ty[1:, None, ::2] ** 2).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), ty.grad.numpy())


MASKS = [lambda a: a[0, 0] > 50, lambda a: a > 60, lambda a: a[:, :, 0, 0] < 70,
         lambda a: a[0] < 0]


@pytest.mark.parametrize("mask", range(len(MASKS)))
def test_boolean_mask(mask):
    k, t = kiln.tensor(A), torch.tensor(A)
    km, tm = MASKS[mask](k), MASKS[mask](t)
    index = (0, 0, km) if mask == 0 else (km if mask != 3 else (1, km))
    tindex = (0, 0, tm) if mask == 0 else (tm if mask != 3 else (1, tm))
    kv, tv = k[index], t[tindex]
    assert kv.shape == tuple(tv.shape)
    np.testing.assert_array_equal(kv.numpy(), tv.numpy())
    k[index] = 0.0
    t[tindex] = 0.0
    np.testing.assert_array_equal(k.numpy(), t.numpy())
    v = np.arange(int(np.prod(tv.shape)), dtype=np.float32).reshape(tuple(tv.shape))
    k[index] = kiln.tensor(v)
    t[tindex] = torch.tensor(v)
    np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_mask_clamps_negatives_like_torch():
    k, t = kiln.tensor([-1.0, 2.0, -3.0]), torch.tensor([-1.0, 2.0, -3.0])
    k[k < 0] = 0
    t[t < 0] = 0
    assert k.tolist() == t.tolist()


def test_iteration_and_writes_through_rows():
    k = kiln.tensor(A[0, 0])
    assert [row.tolist() for row in k] == A[0, 0].tolist()
    for row in k:
        row += 1
    np.testing.assert_array_equal(k.numpy(), A[0, 0] + 1)


@pytest.mark.parametrize("index", [2, -3, (0, 3), (0, 0, -5), [0, 2], (slice(None), [0, -4])])
def test_out_of_range_raises_index_error(index):
    k, t = kiln.zeros(2, 3, 4), torch.zeros(2, 3, 4)
    if isinstance(index, list) or (isinstance(index, tuple) and isinstance(index[-1], list)):
        with pytest.raises(IndexError):
            t[as_index(index, torch.tensor)]
    else:
        with pytest.raises(IndexError):
            t[index]
    with pytest.raises(IndexError):
        k[index]
    with pytest.raises(IndexError):
        k[index] = 1.0


def test_index_errors_like_torch():
    k, t = kiln.zeros(2, 3), torch.zeros(2, 3)
    for index, error in [((0, 0, 0), IndexError), (1.5, IndexError),
                         (slice(None, None, -1), ValueError), (kiln.tensor([[True]]), IndexError)]:
        tindex = torch.tensor([[True]]) if isinstance(index, kiln.Tensor) else index
        with pytest.raises(error):
            t[tindex]
        with pytest.raises(error):
            k[index]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        k[0, 0, 0]
    # Where PyTorch is lenient (two ellipses) or odd (TypeError for a str), as NumPy.
    for index in [(..., 0, ...), "a"]:
        with pytest.raises(IndexError):
            np.zeros((2, 3))[index]
        with pytest.raises(IndexError):
            k[index]


def test_assignment_and_autograd():
    for lib in (kiln, torch):  # a mask over the whole tensor, and x[...] = w: right gradients
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = x * 2
        y[y < 0] = 5.0
        (y * y).sum().backward()
        w = lib.zeros(3, requires_grad=True)
        z = lib.zeros(3)
        z[...] = w * 2
        z.sum().backward()
        assert x.grad.tolist() == [8.0, 0.0, 24.0] and w.grad.tolist() == [2.0, 2.0, 2.0]
    # A write into part of a tensor in a graph: refused until autograd follows
    # writes through views (PyTorch would give x.grad == [0, 2, 2] here).
    x = kiln.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="not supported yet"):
        y[0] = 5.0
    with pytest.raises(RuntimeError, match="not supported yet"):
        kiln.zeros(3)[1:] = x[1:] * 2
    with kiln.no_grad():
        y[0] = 5.0
    assert y.tolist() == [5.0, 2.0, 2.0]


# Several advanced indices in one subscript: adjacent ones keep their place,
# separated ones move to the front; masks count as one index per dim.
_SEVERAL = {
    "rows_and_cols": lambda a: (np.array([0, 2, 3]), np.array([1, 1, 4])),
    "broadcast_after_slice": lambda a: (slice(None), np.array([0, 4]), np.array([[1], [2]])),
    "separated_by_slice": lambda a: (np.array([1, -1]), slice(1, 3), np.array([0, 5])),
    "after_ellipsis": lambda a: (Ellipsis, np.array([0, 2]), np.array([1, 0])),
    "separated_by_int": lambda a: (np.array([[0, 1], [2, 3]]), 2, np.array([1, 5])),
    "mask_then_index": lambda a: (a[:, :, 0, 0] > 0, np.array([0])),
}


@pytest.mark.parametrize("name", sorted(_SEVERAL))
def test_several_advanced_indices_match_torch(name):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5, 6, 3)).astype(np.float32)
    index = _SEVERAL[name](a)
    kindex = tuple(kiln.tensor(v) if isinstance(v, np.ndarray) else v for v in index)
    tindex = tuple(torch.tensor(v) if isinstance(v, np.ndarray) else v for v in index)
    want = torch.tensor(a)[tindex]
    x = kiln.tensor(a).requires_grad_()
    got = x[kindex]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.numpy())

    seed = rng.standard_normal(want.shape).astype(np.float32)
    got.backward(kiln.tensor(seed))
    tx = torch.tensor(a, requires_grad=True)
    tx[tindex].backward(torch.tensor(seed))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)

    k, t = kiln.tensor(a), torch.tensor(a)
    row = rng.standard_normal(want.shape[-1:]).astype(np.float32)
    k[kindex] = kiln.tensor(row)
    t[tindex] = torch.tensor(row)
    np.testing.assert_array_equal(k.numpy(), t.numpy())
    k[kindex] = 3.0
    t[tindex] = 3.0
    np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_several_advanced_indices_that_do_not_broadcast():
    x = kiln.zeros(4, 5)
    with pytest.raises(IndexError, match="could not be broadcast together with shapes"):
        x[kiln.tensor([0, 1]), kiln.tensor([0, 1, 2])]
    with pytest.raises(IndexError, match="out of bounds for dimension 1"):
        x[kiln.tensor([0]), kiln.tensor([5])]
