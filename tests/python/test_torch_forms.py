"""kiln.<fn> and Tensor methods in PyTorch's argument forms where they differ
from the op table's (kiln/_torch_forms.py): the same call text runs on torch
and on kiln and must give the same values, dtypes and gradients."""
import numpy as np
import pytest
import torch

import kiln

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.37 - 3.1
A[1, 2, 3] = A[1, 2, 0]  # a tie, for the full max/min gradient

CALLS = [
    "M.max(X)", "M.max(X, 1)", "M.max(X, dim=1)", "M.max(X, 1, keepdim=True)", "X.max()",
    "X.max(1)", "X.max(dim=-1).values", "X.max(1).indices", "M.max(X, X * 0)",
    "X.max(other=X * 0)", "M.min(X)", "X.min(0)", "M.min(X, X * 0)", "X.min(-1, True).values",
    "M.flatten(X)", "X.flatten()", "X.flatten(1)", "X.flatten(start_dim=0, end_dim=1)",
    "X[0].t()", "M.t(X[0])",
    "M.split(X, 2, 2)", "M.split(X, [1, 3], dim=2)", "X.split([1, 2], 1)", "X.split(2)",
    "X.var(dim=1, unbiased=False)", "M.var(X, 1, False)", "M.var(X, 1, True, True)", "M.var(X)",
    "M.var(X, False)", "M.std(X, dim=(0, 2), correction=0)", "X.std(1, keepdim=True)",
    "M.index_select(X, 1, M.tensor([0, 2]))", "X.index_select(2, M.tensor([3, 0, 0]))",
    "M.gather(X, 2, M.tensor([[[1], [0], [3]], [[2], [2], [0]]]))",
    "M.scatter_add(X, 1, M.zeros(2, 1, 4, dtype=M.int64), X[:, :1] * 2)",
    "X.index_add(1, M.tensor([0, 0]), X[:, :2] * 2)",
    "M.index_add(X, 1, M.tensor([0, 2]), X[:, :2] * 2, alpha=2)",
]


def _flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


@pytest.mark.parametrize("call", CALLS)
def test_torch_form_matches_torch(call):
    k = kiln.tensor(A).requires_grad_()
    t = torch.tensor(A, requires_grad=True)
    got, want = _flat(eval(call, {"M": kiln, "X": k})), _flat(eval(call, {"M": torch, "X": t}))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert g.detach().numpy().dtype == w.detach().numpy().dtype
    floating = [(g, w) for g, w in zip(got, want) if w.dtype.is_floating_point]
    for i, (g, w) in enumerate(floating):  # gradient of a weighted sum of the outputs
        weights = np.random.default_rng(i).standard_normal(w.shape).astype(np.float32)
        (g * kiln.tensor(weights)).sum().backward(retain_graph=True)
        (w * torch.tensor(weights)).sum().backward(retain_graph=True)
    if floating:
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_max_returns_named_parts():
    values, indices = kiln.max(kiln.tensor([[1.0, 5.0], [7.0, 2.0]]), 1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert repr(kiln.min(kiln.tensor([3.0, 1.0]), 0)).startswith("min(values=tensor(1.)")


@pytest.mark.parametrize("call", ["kiln.max(x, keepdim=True)", "kiln.max(x, x, True)",
                                  "kiln.min(x, 0, other=x)", "kiln.var(x, 0, True, correction=1)"])
def test_torch_forms_refuse_mixed_forms(call):
    x = kiln.ones(2, 3)
    with pytest.raises(TypeError):
        eval(call, {"kiln": kiln, "x": x})


def test_a_tensor_where_an_attribute_belongs_is_a_type_error():
    x = kiln.ones(2, 3)
    with pytest.raises(TypeError, match="attribute 'dims' got an unsupported value of type"):
        kiln._C.dispatch("sum", [x], {"dims": x})
