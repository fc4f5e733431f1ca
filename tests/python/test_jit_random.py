"""Random ops inside compiled code (issue 21): kiln.rand, randn, randint and
the _like forms are ops of the table, so a hybridized module, a
@kiln.compile function and a traced graph draw new numbers on every call,
the numbers eager code draws from the same seed, at every size a dynamic
entry serves. The op table rows (tests/oracle/cases_random.py) check fixed
draws; random_ops_test.cpp the statistics."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) + kiln.randn_like(x) * 0.1


def noisy(x):
    return x * kiln.rand_like(x) + kiln.randn(x.shape[0], 1)


def same(a, b):
    return np.array_equal(a.numpy(), b.numpy())


def eager_and_compiled(eager, compiled, x, seed):
    kiln.manual_seed(seed)
    want = eager(x)
    kiln.manual_seed(seed)
    return want, compiled(x)


@pytest.mark.parametrize("how", ["hybridize", "compile"])
def test_each_call_draws_anew_as_eager_does(how):
    kiln.manual_seed(0)
    module = Noisy()
    eager = module.forward if how == "hybridize" else noisy
    compiled = module.hybridize() if how == "hybridize" else kiln.compile(noisy)
    x = kiln.randn(3, 4)
    with kiln.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", kiln.jit.TracerWarning)  # nothing is frozen
        compiled(x)  # records
        for seed in (1, 2):
            want, got = eager_and_compiled(eager, compiled, x, seed)
            assert same(got, want)
            assert not same(compiled(x), got)  # the generator moved on
    assert compiled.cache_info().hits >= 4


def test_a_dynamic_trace_draws_at_every_batch_size():
    traced = kiln.jit.trace(noisy, kiln.randn(3, 4), dynamic_shapes={"x": {0: "batch"}})
    assert "uniform_like(%x)" in str(traced.graph)
    assert "shape=[batch, 1]" in str(traced.graph)
    for batch in (1, 6):
        x = kiln.randn(batch, 4)
        want, got = eager_and_compiled(noisy, traced, x, 10 + batch)
        assert got.shape == (batch, 4) and same(got, want)


def test_a_hybridized_module_keeps_one_entry_for_every_batch_size():
    kiln.manual_seed(0)
    module = Noisy().hybridize()
    with kiln.no_grad():
        for batch in (2, 5, 9):
            x = kiln.randn(batch, 4)
            want, got = eager_and_compiled(module.forward, module, x, batch)
            assert same(got, want)
    assert len(module.cache_info().entries) == 1


def test_symbolic_sizes_reach_every_factory():
    def f(x):
        n = x.shape[0]
        return (kiln.rand(n, 2), kiln.randn((n, 3), dtype=kiln.float64),
                kiln.randint(0, 4, (n,)), kiln.randint(7, (2, n)))
    traced = kiln.jit.trace(f, kiln.randn(3), dynamic_shapes=[{0: "n"}])
    shapes = [tuple(o.shape) for o in traced(kiln.randn(5))]
    assert shapes == [(5, 2), (5, 3), (5,), (2, 5)]
    assert traced(kiln.randn(5))[1].dtype == kiln.float64


def test_draws_require_grad_only_when_asked_for():
    x = kiln.randn(3, requires_grad=True)
    assert not kiln.randn_like(x).requires_grad and not kiln.rand_like(x).requires_grad
    assert kiln.randn(2, requires_grad=True).requires_grad
    assert kiln.rand_like(x, requires_grad=True).requires_grad
    (x * 2 + kiln.randn_like(x)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])


def test_the_seed_still_fixes_eager_draws():
    kiln.manual_seed(4)
    a = (kiln.rand(3), kiln.randn(2, 2), kiln.randint(0, 9, (4,)), kiln.randn_like(kiln.zeros(2)))
    kiln.manual_seed(4)
    b = (kiln.rand(3), kiln.randn(2, 2), kiln.randint(0, 9, (4,)), kiln.randn_like(kiln.zeros(2)))
    assert all(same(u, v) for u, v in zip(a, b))
    with pytest.raises(TypeError, match="normal_like: expected a floating dtype, got int64"):
        kiln.randn_like(kiln.zeros(2, dtype=kiln.int64))


def test_random_ops_export_to_onnx_runtime(tmp_path):
    ort = pytest.importorskip("onnxruntime")

    def f(x):
        return x + kiln.rand_like(x) * 0 + kiln.randn(x.shape[0], 4) * 0

    traced = kiln.jit.trace(f, kiln.randn(3, 4), dynamic_shapes={"x": {0: "batch"}})
    kiln.onnx.export(traced, None, tmp_path / "f.onnx")
    run = ort.InferenceSession(str(tmp_path / "f.onnx"), providers=["CPUExecutionProvider"])
    for batch in (1, 5):
        x = np.random.RandomState(batch).randn(batch, 4).astype(np.float32)
        (got,) = run.run(None, {run.get_inputs()[0].name: x})
        np.testing.assert_allclose(got, x)  # the draws times 0: the inputs again
