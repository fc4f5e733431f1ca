"""The compositions of ops/norms.h and ops/indexing.h, lerp, scatter's torch
forms, the in-place and arc* forms of the libm ops, and the thread count:
the same call text runs on torch and on kiln and must give the same values,
dtypes and float64 gradients (the ops of the table themselves are checked
row by row in tests/oracle/cases_math_more.py)."""
import math

import numpy as np
import pytest
import torch

import kiln

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5))
A[0, 1, :] = 0.0  # a zero row: norms there are 0, with a zero gradient
A[1, 2, 3], A[1, 2, 1] = 4.0, -4.0  # a tie for the largest |x|
B = RNG.standard_normal((3, 6, 5))
IDX = np.array([[2, 0, 1, 0, 2], [1, 1, 0, 2, 0]])

NORM_CALLS = [
    "M.norm(X)", "M.norm(X, 2)", "M.norm(X, p=1, dim=1)", "M.norm(X, 3, dim=(0, 2))",
    "M.norm(X, 0.5, dim=-1, keepdim=True)", "M.norm(X, float('inf'), dim=2)",
    "M.norm(X, -float('inf'), dim=0)", "M.norm(X, 0, dim=1)", "M.norm(X, 'fro', dim=(1, 2))",
    "M.norm(X, p='fro', keepdim=True)", "X.norm()", "X.norm(1, 2, True)", "X.norm(p=2, dim=0)",
    "M.linalg.vector_norm(X)", "M.linalg.vector_norm(X, 2, dim=-1)",
    "M.linalg.vector_norm(X, ord=1, dim=(0, 1), keepdim=True)",
    "M.linalg.vector_norm(X, float('inf'))", "M.linalg.vector_norm(X[1:], -1.5, dim=2)",
    "M.linalg.vector_norm(X[:, :1], 0)",
    "M.linalg.norm(X)", "M.linalg.norm(X, keepdim=True)", "M.linalg.norm(X, dim=1)",
    "M.linalg.norm(X, 3, dim=2)", "M.linalg.norm(X, dim=(0, 2))",
    "M.linalg.norm(X, 'fro', dim=(2, 1), keepdim=True)", "M.linalg.norm(X[0], 1)",
    "M.linalg.norm(X[0], -1)", "M.linalg.norm(X[0], float('inf'))",
    "M.linalg.norm(X[1], -float('inf'))", "M.linalg.norm(X[0, 0], 0.5)",
    "M.linalg.norm(X[0, 0], float('inf'))", "M.linalg.norm(X, 1, dim=(2, 0))",
    "M.linalg.matrix_norm(X)", "M.linalg.matrix_norm(X, 1)",
    "M.linalg.matrix_norm(X, -float('inf'), dim=(0, 2), keepdim=True)",
    "M.linalg.matrix_norm(X, ord=float('inf'), dim=(-1, -3))",
]

CDIST_CALLS = [
    "M.cdist(X, Y)", "M.cdist(X, Y, p=1)", "M.cdist(X, Y, p=float('inf'))",
    "M.cdist(X, Y, 3)", "M.cdist(X[0], Y[1])", "M.cdist(X[:1], Y)", "M.cdist(X, X)",
    "M.cdist(X, Y, 0.5)",
]

INDEX_CALLS = [
    "M.scatter(X, 1, I, Y[:, :2])", "X.scatter(2, I[:, :, :3], Y[:, :2, :3])",
    "M.scatter(X, 0, I, 1.5)", "M.scatter(X, 0, I, value=-2.0)",
    "M.index_fill(X, 1, M.tensor([0, -1]), -1.5)", "X.index_fill(2, M.tensor([4, 1]), W)",
    "M.index_fill(X, 0, M.tensor(2), 0.0)", "M.index_fill(X[0, 0, 0], 0, M.tensor([0]), W)",
    "M.index_copy(X, 1, M.tensor([3, 0]), Y[:, :2, :])",
    "X.index_copy(0, M.tensor([2, 0, 1]), Y[:, :4])",
    "M.take_along_dim(X, M.argsort(Y[:, :4], 2), 2)", "X.take_along_dim(I[:1, :1], dim=0)",
    "M.take_along_dim(X, I[:1, :1, :2], dim=2)", "M.take_along_dim(X, I[0, :3])",
    "M.masked_select(X, X > 0)", "X.masked_select(M.tensor([True, False, True, True, False]))",
    "M.masked_scatter(X, X > 0.5, Y)", "X.masked_scatter(M.tensor([[True], [False], [True], "
    "[False]]), Y)",
    "M.lerp(X, Y[:, :4], 0.3)", "X.lerp(Y[:, :4], 0.75)", "M.lerp(X, Y[:, :4], Y[:, 1:5])",
    "M.lerp(X, Y[:, :4, :1], W)", "M.arcsin(X / 5)", "(X / 5).arccos()", "M.arctan(X)",
    "M.arcsinh(X)", "M.arccosh(X * X + 1.5)", "M.arctanh(X / 5)", "M.arctan2(X, Y[:, :4])",
    "X.arctan2(Y[:, :4])", "M.atan2(X, Y[:, :4] * 0)", "M.hypot(X, Y[:, :4])",
    "M.logaddexp(X, Y[:, :4])",
]


def _flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def run_both(call, arrays):
    """call evaluated with kiln and with torch over float64 leaves made from
    arrays (X, Y, W); the outputs and the leaves of each."""
    results = []
    for module, make in ((kiln, kiln.tensor), (torch, torch.tensor)):
        leaves = {k: make(v).requires_grad_() for k, v in arrays.items()}
        names = {"M": module, "I": _index(module, make), **leaves}
        results.append((_flat(eval(call, names)), leaves))
    return results


def _index(module, make):
    """An index for dim 1 of X [3, 4, 5] and of Y [3, 6, 5]: [3, 2, 5] of
    distinct rows per column, so the last write is unambiguous."""
    return make(np.stack([IDX, IDX[::-1], IDX]))


def check_matches_torch(call, arrays, rtol=1e-10, atol=1e-12):
    (got, k_leaves), (want, t_leaves) = run_both(call, arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=call)
        assert g.detach().numpy().dtype == w.detach().numpy().dtype, call
    for i, (g, w) in enumerate(zip(got, want)):  # the gradient of a weighted sum
        if not w.requires_grad:
            continue
        weights = np.random.default_rng(i).standard_normal(tuple(w.shape))
        (g * kiln.tensor(weights).to(g.dtype)).sum().backward(retain_graph=True)
        (w * torch.tensor(weights).to(w.dtype)).sum().backward(retain_graph=True)
    for name, t_leaf in t_leaves.items():
        k_grad = k_leaves[name].grad
        if t_leaf.grad is None:
            assert k_grad is None or not np.any(k_grad.numpy()), (call, name)
            continue
        np.testing.assert_allclose(k_grad.numpy(), t_leaf.grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=f"{call}: gradient of {name}")


@pytest.mark.parametrize("call", NORM_CALLS)
def test_norms_match_torch(call):
    check_matches_torch(call, {"X": A})


@pytest.mark.parametrize("call", CDIST_CALLS)
def test_cdist_matches_torch(call):
    # Few rows (P, R <= 25), so torch computes from the differences too.
    x, y = A[:, :4].copy(), B[:, :6].copy()
    y[0, 2] = x[0, 1]  # a pair of equal rows: distance 0, gradient 0
    check_matches_torch(call, {"X": x, "Y": y})


@pytest.mark.parametrize("call", INDEX_CALLS)
def test_indexing_and_lerp_match_torch(call):
    check_matches_torch(call, {"X": A[:, :4], "Y": B, "W": np.array(0.7)})


def test_scatter_add_reduce_has_scatter_adds_gradient():
    # torch.scatter(reduce="add") has no derivative; kiln gives scatter_add's.
    x, src = A[:, :4], B[:, :2]
    index = kiln.tensor(np.stack([IDX[:, :5]] * 3))
    kx, ks = kiln.tensor(x).requires_grad_(), kiln.tensor(src).requires_grad_()
    tx, ts = torch.tensor(x).requires_grad_(), torch.tensor(src).requires_grad_()
    got = kiln.scatter(kx, 1, index, ks, reduce="add")
    want = torch.scatter_add(tx, 1, torch.tensor(index.numpy()), ts)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    (got * got).sum().backward()
    (want * want).sum().backward()
    np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ks.grad.numpy(), ts.grad.numpy(), rtol=1e-12)
    product = kiln.scatter(kx, 1, index, ks, reduce="multiply")
    with pytest.raises(RuntimeError, match="derivative of reduce='multiply' is not implemented"):
        product.sum().backward()


INPLACE_CALLS = [
    "X.scatter_(1, I, Y)", "X.scatter_(0, I[:, :3], 2.5, reduce='multiply')",
    "X.index_fill_(2, M.tensor([1, 3]), -1.0)", "X.index_copy_(1, M.tensor([1]), Y[:, :1])",
    "X.masked_scatter_(X > 0, Y)", "X.lerp_(Y[:, :4], 0.25)", "X.lerp_(Y[:, :4], X * 0 + 0.6)",
    "X.log1p_()", "X.expm1_()", "X.reciprocal_()", "X.erf_()", "X.erfc_()", "X.tan_()",
    "X.atan_()", "X.sinh_()", "X.cosh_()", "X.asinh_()", "X.arctan_()", "X.atan2_(Y[:, :4])",
    "X.hypot_(Y[:, :4])", "X.arctan2_(Y[:, :4])",
]


@pytest.mark.parametrize("call", INPLACE_CALLS)
def test_in_place_forms_write_into_the_tensor(call):
    for module, make in ((kiln, kiln.tensor), (torch, torch.tensor)):
        x = make(np.abs(A[:, :4]) + 0.5)
        names = {"M": module, "X": x, "Y": make(B), "I": _index(module, make)}
        result = eval(call, names)
        assert result is x, call
        if module is kiln:
            got = x.numpy().copy()
    np.testing.assert_allclose(got, x.numpy(), rtol=1e-12, err_msg=call)


def test_in_place_forms_differentiate_through_the_old_value():
    for module, make in ((kiln, kiln.tensor), (torch, torch.tensor)):
        leaf = make(A[:, :4]).requires_grad_()
        y = leaf * 2
        y.index_fill_(1, make(np.array([0, 2])), 0.5)
        y.lerp_(make(B[:, :4]), 0.3)
        y.atan_()
        (y * y).sum().backward()
        if module is kiln:
            got = leaf.grad.numpy()
    np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("call, error, match", [
    ("M.norm(X, 'nuc')", NotImplementedError, "needs the singular values"),
    ("M.linalg.matrix_norm(X, 2)", NotImplementedError, "needs the singular values"),
    ("M.norm(X, 'abc')", RuntimeError, "Order abc not supported"),
    ("M.linalg.norm(X, 2)", RuntimeError, "the input must be 1D or 2D. Got 3D"),
    ("M.linalg.norm(X, dim=(0, 1, 2))", RuntimeError, "must be of length 1 or 2"),
    ("M.linalg.norm(X[0, 0], 'fro')", RuntimeError, "must have at least 2 dimensions"),
    ("M.linalg.matrix_norm(X, 3)", RuntimeError, "Order 3 not supported"),
    ("M.linalg.vector_norm(X, 'fro')", TypeError, "must be Number, not str"),
    ("M.linalg.vector_norm(M.ones(2, 3, dtype=M.int64))", RuntimeError,
     "Expected a floating point"),
    ("M.linalg.vector_norm(X[:, :0], float('inf'))", RuntimeError, "on an empty tensor"),
    ("M.cdist(X[0, 0], X[0, 0])", RuntimeError, "cdist only supports at least 2D tensors"),
    ("M.cdist(X[0], X[0, :, :3])", RuntimeError, "must have the same number of columns"),
    ("M.cdist(X[0], X[0], p=-1)", RuntimeError, "cdist only supports non-negative p values"),
    ("M.lerp(M.ones(3, dtype=M.int64), M.ones(3, dtype=M.int64), 0.5)", RuntimeError, "lerp"),
    ("M.index_fill(X, 1, M.tensor([4]), 1.0)", IndexError, "out of bounds"),
    ("M.index_fill(X, 1, M.tensor([[0]]), 1.0)", RuntimeError, "Index has to be a vector"),
    ("M.index_copy(X, 1, M.tensor([0]), X[:, :2])", IndexError, "Number of indices"),
    ("M.index_copy(X, 1, M.tensor([0]), X[:, :1, :4])", RuntimeError, "same slice shapes"),
    ("M.index_copy(X, 1, M.tensor([0.0]), X[:, :1])", RuntimeError, "Expected a long tensor"),
    ("M.index_fill(X, 1, M.tensor([0.0]), 1.0)", IndexError, "Expected dtype int64"),
    ("M.masked_select(X, X)", RuntimeError, "expected BoolTensor"),
    ("M.masked_scatter(X, X > -10, X[0])", RuntimeError, "at least as many elements"),
    ("M.take_along_dim(X, M.tensor([0]), 1)", RuntimeError, "same number of dimensions"),
    ("M.scatter(X, 1, M.zeros(3, 1, 5, dtype=M.int64), X, reduce='max')", RuntimeError,
     "reduce argument must be either add or multiply"),
    ("M.set_num_threads(0)", RuntimeError, "set_num_threads expects a positive integer"),
])
def test_errors_match_torchs(call, error, match):
    for module, make in ((kiln, kiln.tensor), (torch, torch.tensor)):
        if module is torch and ("nuc" in call or "matrix_norm(X, 2)" in call
                                or "reduce='max'" in call):
            continue  # torch computes these (or raises another kind): kiln's own errors
        with pytest.raises(error, match=None if module is torch else match):
            eval(call, {"M": module, "X": make(A)})


def test_masked_select_refuses_to_be_traced():
    x = kiln.tensor(A)

    @kiln.compile
    def f(x):
        return kiln.masked_select(x, x > 0)

    with pytest.raises(RuntimeError, match="masked_select: the shape of its output depends"):
        f(x)


def test_compositions_compile_to_eagers_values():
    x, y = kiln.tensor(A[:, :4]), kiln.tensor(B)
    index = kiln.tensor(np.stack([IDX, IDX[::-1], IDX]))

    def f(x, y):
        filled = x.index_fill(2, kiln.tensor([1, -1]), 0.25).scatter(1, index, y)
        return (kiln.norm(filled, dim=1) + kiln.cdist(x, y[:, :3]).sum(-1)[..., :1]
                + kiln.linalg.matrix_norm(x, 1)[:, None] + kiln.lerp(x, y[:, :4], 0.4).sum(1)
                + kiln.masked_scatter(x, x > 0, y).sum(1) + kiln.take_along_dim(
                    x, kiln.argmax(x, 2, keepdim=True), 2).sum(1))

    compiled = kiln.compile(f)
    np.testing.assert_allclose(compiled(x, y).numpy(), f(x, y).numpy(), rtol=1e-12)
    np.testing.assert_allclose(compiled(x, y).numpy(), f(x, y).numpy(), rtol=1e-12)


def test_the_thread_count_is_openmps():
    before = kiln.get_num_threads()
    try:
        kiln.set_num_threads(1)
        assert kiln.get_num_threads() == 1
        assert math.isclose(kiln.norm(kiln.ones(1000)).item(), math.sqrt(1000), rel_tol=1e-6)
    finally:
        kiln.set_num_threads(before)
    assert kiln.get_num_threads() == before
    assert not hasattr(kiln.ones(1), "set_num_threads")


def test_names_are_torchs():
    names = ["log1p", "expm1", "log2", "log10", "reciprocal", "erf", "erfc", "tan", "asin",
             "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "atan2", "hypot",
             "logaddexp", "lerp", "norm", "scatter", "index_fill", "index_copy",
             "take_along_dim", "masked_select", "masked_scatter", "arcsin", "arctan2"]
    for name in names + ["cdist", "set_num_threads", "get_num_threads"]:
        assert hasattr(kiln, name) and hasattr(torch, name), name
    for name in names + [f"{n}_" for n in names[:18]] + ["scatter_", "index_fill_",
                                                         "index_copy_", "masked_scatter_",
                                                         "lerp_", "arcsin_"]:
        assert hasattr(kiln.Tensor, name) and hasattr(torch.Tensor, name), name
    for name in ("vector_norm", "matrix_norm", "norm"):
        assert hasattr(kiln.linalg, name) and hasattr(torch.linalg, name), name
    with pytest.raises(AttributeError, match=r"kiln does not implement torch\.linalg\.svd"):
        kiln.linalg.svd  # noqa: B018
