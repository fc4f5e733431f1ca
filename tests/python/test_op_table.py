"""Replays the op test table (tests/oracle/cases_*.py) from Python: each row
runs through kiln._C.dispatch with the row's op, inputs (in the row's memory
layout) and attributes, and must match PyTorch at the row's tolerance, or
raise with the row's error message."""
import re

import numpy as np
import pytest

import kiln
from gen_refs import all_cases, to_torch
from oracle import default_tolerances

CASES = all_cases()


def relayout(array: np.ndarray, layout: str) -> np.ndarray:
    """The same values in the row's layout, as a writable NumPy view."""
    if layout == "contiguous" or array.ndim == 0:
        return array
    if layout == "transposed":
        return np.asfortranarray(array)
    if layout == "strided":
        shape = array.shape[:-1] + (array.shape[-1] * 2,)
        view = np.zeros(shape, dtype=array.dtype)[..., ::2]
        view[...] = array
        return view
    if layout == "expanded":
        row = np.ascontiguousarray(array[0])
        strides = (0,) + row.strides
        return np.lib.stride_tricks.as_strided(row, array.shape, strides, writeable=True)
    raise ValueError(f"unknown layout {layout}")


def kiln_operand(array, spec):
    if array is None:
        return None
    if spec.wrapped:
        return array.item()  # a Python number, as a user would write it
    return kiln.from_numpy(relayout(array, spec.layout))


def make_arrays(case):
    rng = np.random.RandomState(case.seed() % (2**31))
    return [spec.make(rng) for spec in case.inputs]


def assert_matches(got, want: np.ndarray, rtol, atol, where):
    got = got.detach().numpy()
    assert got.shape == want.shape, f"{where}: shape {got.shape}, want {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, want {want.dtype}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=where)


@pytest.mark.parametrize("case", CASES, ids=[c.case_id() for c in CASES])
def test_row_matches_pytorch(case):
    arrays = make_arrays(case)
    operands = [kiln_operand(a, s) for a, s in zip(arrays, case.inputs)]
    if case.error is not None:
        with pytest.raises(Exception, match=re.escape(case.error)):
            kiln._C.dispatch(case.op, operands, case.attrs)
        return
    result = kiln._C.dispatch(case.op, operands, case.attrs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    expected = case.torch_fn(*[to_torch(a, s) for a, s in zip(arrays, case.inputs)])
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    expected = [e.detach().numpy() for e in expected]
    compared = case.compare_outputs or range(len(expected))
    assert len(compared) == len(expected)
    dtypes = [str(e.dtype) for e in expected] + [s.dtype for s, a in zip(case.inputs, arrays)
                                                 if a is not None]
    rtol, atol = default_tolerances(dtypes, case.reduce_len)
    rtol = case.rtol if case.rtol is not None else rtol
    atol = case.atol if case.atol is not None else atol
    for k, want in zip(compared, expected):
        assert_matches(outputs[k], want, rtol, atol, f"{case.case_id()} output {k}")


def test_every_op_has_a_row():
    covered = {c.op for c in CASES if c.error is None}
    # custom_function calls back into an autograd.Function registered at run
    # time: test_autograd_function_compiled.py runs it. The collectives need
    # several ranks: test_ddp.py runs them under mpirun.
    ops = {name for name, *_ in kiln._C.op_schemas()} - {
        "custom_function", "all_reduce_start", "all_reduce_wait"}
    assert ops - covered == set()
