"""The op test table's gradient rows from Python: for a fixed random upstream
gradient, kiln.autograd.grad of each row's floating outputs w.r.t. its
floating inputs must match torch.autograd.grad (as gen_refs.py computes it
for the C++ test), at ten times the row's forward tolerance."""
import numpy as np
import pytest
import torch

import kiln
from gen_refs import differentiable, to_torch
from oracle import default_tolerances
from test_op_table import CASES, kiln_operand, make_arrays

GRAD_CASES = [c for c in CASES if c.error is None and c.grad]


def torch_gradients(case, arrays, wanted):
    tensors = []
    for i, (spec, arr) in enumerate(zip(case.inputs, arrays)):
        t = to_torch(arr, spec)
        tensors.append(t.clone().requires_grad_(True) if i in wanted else t)
    try:
        result = case.torch_fn(*tensors)
    except RuntimeError:
        return None  # e.g. an in-place lambda on a leaf: no gradient row
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    with_grad = [k for k, o in enumerate(outputs) if o.is_floating_point() and o.requires_grad]
    if not with_grad:
        return None
    rng = np.random.RandomState((case.seed() + 1) % (2**31))
    seeds = {k: rng.standard_normal(outputs[k].shape).astype(outputs[k].detach().numpy().dtype)
             for k in with_grad}
    grads = torch.autograd.grad([outputs[k] for k in with_grad], [tensors[i] for i in wanted],
                                [torch.from_numpy(seeds[k]) for k in with_grad],
                                allow_unused=True)
    grads = [np.zeros(tensors[i].shape, tensors[i].detach().numpy().dtype) if g is None
             else g.numpy() for i, g in zip(wanted, grads)]
    return seeds, grads


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.case_id() for c in GRAD_CASES])
def test_row_gradients_match_pytorch(case):
    arrays = make_arrays(case)
    if any(a is not None and a.size > 4096 for a in arrays):
        pytest.skip("large rows check forward accuracy only")
    wanted = [i for i, (s, a) in enumerate(zip(case.inputs, arrays)) if differentiable(s, a)]
    reference = torch_gradients(case, arrays, wanted) if wanted else None
    if reference is None:
        pytest.skip("PyTorch differentiates nothing in this row")
    seeds, want = reference
    operands = [kiln_operand(a, s) for a, s in zip(arrays, case.inputs)]
    for i in wanted:
        operands[i].requires_grad_()
    result = kiln._C.dispatch(case.op, operands, case.attrs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    compared = case.compare_outputs or range(len(outputs))
    roots = [outputs[compared[k]] for k in seeds]
    got = kiln.autograd.grad(roots, [operands[i] for i in wanted],
                             [kiln.from_numpy(s) for s in seeds.values()], allow_unused=True)
    dtypes = [str(s.dtype) for s in seeds.values()] + [s.dtype for s, a in
                                                       zip(case.inputs, arrays) if a is not None]
    rtol, atol = default_tolerances(dtypes, case.reduce_len)
    rtol = max(10 * (case.rtol if case.rtol is not None else rtol), 1e-6)
    atol = max(10 * (case.atol if case.atol is not None else atol), 1e-7)
    for i, g, w in zip(wanted, got, want):
        g = np.zeros_like(w) if g is None else g.numpy()
        assert g.shape == w.shape, f"grad of input {i}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{case.case_id()} grad of input {i}")
