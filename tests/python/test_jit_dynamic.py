"""Dynamic shapes (issue 21): sizes read in traced Python code stay symbolic,
decisions on them become guards, one compiled entry serves every batch size
and sequence length. PyTorch, where installed, is the oracle for the model's
numbers; kiln's own eager run is the oracle for the graph."""
import re
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn


class SelfAttention(nn.Module):
    """A transformer block's attention as PyTorch users write it: sizes from
    x.shape, heads by view/reshape, a causal mask sliced to the length."""

    def __init__(self, width=16, heads=2, max_len=256):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", kiln.tensor(np.tril(np.ones((max_len, max_len),
                                                                  dtype=np.float32))))

    def forward(self, x):
        b, s, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, s, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, -1).transpose(1, 2)
        v = v.reshape(x.shape[0], x.shape[1], self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        keep = self.mask[:s, :s]
        att = kiln.where(keep > 0, att, kiln.full((1,), -1e9)).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, c)
        return self.proj(y)


def eager(module, x):
    with kiln.no_grad():
        return module(x).numpy()


def test_attention_traced_once_runs_every_length_as_eager():
    kiln.manual_seed(0)
    m = SelfAttention().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is specialized
        traced = kiln.jit.trace(m, kiln.randn(2, 5, 16),
                                dynamic_shapes={"x": {0: "batch", 1: "seq"}})
    text = str(traced.graph)
    assert "%x : f32[batch, seq, 16]" in text
    assert "view(%" in text and "{shape=[batch, seq, 2, 8]}" in text
    for b, s in [(1, 1), (3, 7), (2, 128)]:
        x = kiln.randn(b, s, 16)
        np.testing.assert_array_equal(traced(x).detach().numpy(), eager(m, x))


def test_attention_matches_pytorch_at_several_lengths():
    torch = pytest.importorskip("torch")
    kiln.manual_seed(1)
    m = SelfAttention().eval()
    traced = kiln.jit.trace(m, kiln.randn(1, 3, 16), dynamic_shapes=[{0: "batch", 1: "seq"}])
    w_qkv, b_qkv = (torch.from_numpy(t.detach().numpy()) for t in (m.qkv.weight, m.qkv.bias))
    w_proj, b_proj = (torch.from_numpy(t.detach().numpy()) for t in (m.proj.weight, m.proj.bias))
    for b, s in [(1, 1), (2, 7), (3, 40)]:
        x = np.random.default_rng(s).standard_normal((b, s, 16)).astype(np.float32)
        q, k, v = torch.nn.functional.linear(torch.from_numpy(x), w_qkv, b_qkv).chunk(3, -1)
        q, k, v = (t.view(b, s, 2, 8).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        want = torch.nn.functional.linear(y.transpose(1, 2).reshape(b, s, 16), w_proj, b_proj)
        np.testing.assert_allclose(traced(kiln.tensor(x)).detach().numpy(), want.numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_sizes_in_python_code_are_symbolic_while_tracing():
    seen = []

    def f(x):
        n = x.shape[0]
        seen.append((type(n).__name__, str(n), n.hint, x.size(1)))
        half = x[:, : x.shape[1] // 2]
        return half + kiln.zeros(x.shape[0], x.shape[1] // 2)

    traced = kiln.jit.trace(f, kiln.randn(3, 8), dynamic_shapes=[{0: "n", 1: "m"}])
    assert seen == [("SymInt", "n", 3, kiln._C.SymInt)] or seen[0][:3] == ("SymInt", "n", 3)
    assert str(traced.graph.outputs[0].shape) == "('n', 'm // 2')"
    x = kiln.randn(5, 10)
    np.testing.assert_array_equal(traced(x).numpy(), x.numpy()[:, :5])
    assert isinstance(kiln.randn(2, 3).shape[0], int)  # outside a trace: plain ints


def test_example_size_of_one_is_general():
    bias = kiln.randn(1, 4)
    traced = kiln.jit.trace(lambda x: x + bias, kiln.randn(1, 4), dynamic_shapes=[{0: "b"}])
    assert "guard" not in str(traced.graph)
    x = kiln.randn(6, 4)
    np.testing.assert_array_equal(traced(x).numpy(), (x + bias).numpy())


def test_int_of_a_size_specializes_with_a_warning_at_the_users_line():
    def f(x):
        rows = [x[i] * 2.0 for i in range(x.shape[0])]  # a Python loop over the batch
        return kiln.stack(rows)

    with pytest.warns(kiln.jit.TracerWarning, match=r"batch == 3.*test_jit_dynamic\.py:\d+"):
        traced = kiln.jit.trace(f, kiln.randn(3, 2), dynamic_shapes=[{0: "batch"}])
    assert "guard batch == 3" in str(traced.graph)
    with pytest.raises(ValueError, match="batch == 3"):
        traced(kiln.randn(4, 2))


def test_len_specializes_and_says_to_use_shape():
    with pytest.warns(kiln.jit.TracerWarning, match=r"len\(\).*x\.shape\[0\]"):
        kiln.jit.trace(lambda x: x * len(x), kiln.randn(3, 2), dynamic_shapes=[{0: "b"}])


def test_shared_symbols_and_bounds_are_checked_on_every_call():
    traced = kiln.jit.trace(lambda x, y: x @ y.transpose(0, 1),
                            (kiln.randn(4, 3), kiln.randn(4, 3)),
                            dynamic_shapes={"x": {0: "n"}, "y": {0: kiln.jit.Dim("n", max=8)}})
    assert traced(kiln.randn(8, 3), kiln.randn(8, 3)).shape == (8, 8)
    with pytest.raises(ValueError, match=r"input 1 \('y'\) dim 0 is n, which input 0 \('x'\) "
                                         r"dim 0 sets to 5, but got 6"):
        traced(kiln.randn(5, 3), kiln.randn(6, 3))
    with pytest.raises(ValueError, match="n <= 8"):
        traced(kiln.randn(9, 3), kiln.randn(9, 3))
    with pytest.raises(ValueError, match="not inputs"):
        kiln.jit.trace(lambda x: x, kiln.randn(2), dynamic_shapes={"z": {0: "n"}})


# -- hybridize and @kiln.compile -----------------------------------------------------------------

def test_hybridize_makes_a_changing_batch_symbolic_and_keeps_one_entry():
    kiln.manual_seed(2)
    m = SelfAttention().eval()
    h = SelfAttention().eval()
    h.load_state_dict(m.state_dict())
    h.hybridize()
    for b in [2, 3, 5, 9, 1, 3]:
        x = kiln.randn(b, 6, 16)
        np.testing.assert_array_equal(eager(h, x), eager(m, x))
    info = h.cache_info()
    assert len(info.entries) == 1, info
    assert "float32[s0, 6, 16]" in info.entries[0]
    assert info.misses == ["first call", "input 0 dim 0: 2 -> 3"]
    assert info.hits == 4


def test_a_branch_on_a_size_is_a_guard_and_a_failed_guard_records_again():
    @kiln.compile(dynamic=True)
    def f(x):
        if x.shape[1] > 4:
            return x * 2.0
        return x + 1.0

    short, other, long = kiln.randn(2, 3), kiln.randn(5, 4), kiln.randn(2, 9)
    np.testing.assert_array_equal(f(short).numpy(), short.numpy() + 1)
    np.testing.assert_array_equal(f(other).numpy(), other.numpy() + 1)
    np.testing.assert_array_equal(f(long).numpy(), long.numpy() * 2)
    info = f.cache_info()
    assert len(info.entries) == 2
    assert re.search(r"guards: s1 <= 4 \(at test_jit_dynamic\.py:\d+\)|guards: s1 <= 4",
                     info.entries[0]), info
    assert "s1 <= 4" in info.misses[-1] and "which these sizes break" in info.misses[-1]


def test_dynamic_false_keeps_one_entry_per_shape():
    m = nn.Linear(4, 2).eval()
    m.hybridize(dynamic=False)
    with kiln.no_grad():
        for b in [1, 2, 3]:
            m(kiln.randn(b, 4))
    assert len(m.cache_info().entries) == 3


def test_training_step_with_changing_batch_matches_eager():
    kiln.manual_seed(3)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    ref.load_state_dict(net.state_dict())
    net.hybridize()
    for b in [4, 7, 2]:
        x, target = kiln.randn(b, 8), kiln.randint(0, 3, (b,))
        for model in (net, ref):
            model.zero_grad()
            nn.functional.cross_entropy(model(x), target).backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_peak_memory_is_one_formula_that_each_size_plans_exactly():
    kiln.manual_seed(0)
    block = SelfAttention()
    reports = {}
    for seq in (1, 7, 33):
        x = kiln.randn(2, seq, 16)
        traced = kiln.jit.trace(block, x, dynamic_shapes={"x": {0: "batch", 1: "seq"}})
        reports[seq] = (traced.memory_formula(), traced.report())
    formulas = {str(formula) for formula, _ in reports.values()}
    assert len(formulas) == 1, formulas  # the same plan whatever size it was traced at
    formula = reports[1][0]
    assert set(formula.symbols) == {"batch", "seq"}
    assert "seq*seq" in formula.intermediates or "seq^2" in formula.intermediates
    for seq, (_, report) in reports.items():
        assert "memory at any size: peak" in str(report)
        outputs = 2 * seq * 16 * 4
        assert formula.evaluate({"batch": 2, "seq": seq}) == report.planned_bytes + outputs


def test_max_batch_for_a_memory_budget():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    traced = kiln.jit.trace(model, kiln.randn(4, 32), dynamic_shapes={"input": {0: "batch"}})
    formula = traced.memory_formula()
    assert formula.peak == "296*batch"  # [b, 64] hidden + [b, 10] output, in float32

    def total(b):
        return formula.weights + formula.evaluate({"batch": b})

    for budget in (total(1), total(1000) + 100, 2**30):
        b = traced.max_batch_for(budget)
        assert total(b) <= budget < total(b + 1)
    assert traced.max_batch_for(formula.weights) is None
    static = kiln.jit.trace(model, kiln.randn(4, 32))
    assert static.memory_formula() is None
    with pytest.raises(ValueError, match="no symbolic sizes"):
        static.max_batch_for(2**30)


@pytest.mark.parametrize("probabilities", [False, True])
def test_a_compiled_loss_serves_every_batch_from_one_entry(probabilities):
    F = nn.functional
    weight = kiln.rand(5) + 0.5

    def loss(logits, target):
        return F.cross_entropy(logits, target, weight=weight, label_smoothing=0.1)

    compiled = kiln.compile(dynamic=True)(loss)
    for b in (4, 1, 9):
        logits = kiln.randn(b, 5)
        target = kiln.randn(b, 5).softmax(1) if probabilities else kiln.randint(0, 5, (b,))
        np.testing.assert_array_equal(compiled(logits, target).numpy(),
                                      loss(logits, target).numpy())
    assert len(compiled.cache_info().entries) == 1, compiled.cache_info()


def test_a_boolean_mask_read_is_captured_with_a_size_the_data_decides():
    def positives(x):
        return x[x > 0].sum() + x[x < 0].abs().max()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is frozen, so nothing is reported
        traced = kiln.jit.trace(positives, kiln.randn(4, 3), dynamic_shapes=[{0: "b"}],
                                strict=True)
    for rows in (4, 1, 7, 4):
        x = kiln.randn(rows, 3)
        np.testing.assert_allclose(traced(x).numpy(), positives(x).numpy(), rtol=1e-6)


def test_a_mask_among_several_indices_is_reported_at_the_users_line():
    def first_column_where_positive(x):
        return x[x[:, 0] > 0, kiln.tensor([0])].sum()  # positions read on the host

    with pytest.warns(kiln.jit.TracerWarning,
                      match=r"boolean-mask indexing x\[mask\].*test_jit_dynamic\.py:\d+"):
        kiln.jit.trace(first_column_where_positive, kiln.randn(4, 3), dynamic_shapes=[{0: "b"}])
    with pytest.raises(kiln.jit.TraceError, match="boolean-mask indexing"):
        kiln.jit.trace(first_column_where_positive, kiln.randn(4, 3), dynamic_shapes=[{0: "b"}],
                       strict=True)


def test_fused_chain_over_a_symbolic_input_and_a_keepdim_scalar():
    # Regression: x - x.amax(keepdim) -> exp fused into one op whose infer
    # compared [1, 1] with [n, 3] dim by dim and could not decide 1 == n.
    def f(x):
        return (x - x.amax(dim=(0, 1), keepdim=True)).exp()

    traced = kiln.jit.trace(f, kiln.randn(4, 3), dynamic_shapes=[{0: "n"}])
    for rows in (4, 1, 7):
        x = kiln.randn(rows, 3)
        np.testing.assert_allclose(traced(x).numpy(), f(x).numpy(), rtol=1e-6)
