"""kiln.cond, kiln.while_loop, kiln.scan and kiln.fori_loop (issue 22):
eager results equal plain Python's; traced, hybridized and compiled code
keeps one node owning sub-graphs, so inputs that take another branch or
another number of iterations than the traced ones still get eager's
results; gradients through compiled cond and scan equal eager autograd's."""
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import nn


def op_names(graph):
    return [node.op for node in graph.nodes]


def branchy(x, w):
    return kiln.cond(x.sum() > 0, lambda v: (v * w, v.sum()), lambda v: (-v, v.mean()), x)


def test_cond_eager_follows_the_predicate_and_python_bools():
    x = kiln.tensor([1.0, 2.0])
    w = kiln.tensor([3.0, 4.0])
    y, s = branchy(x, w)
    np.testing.assert_array_equal(y.numpy(), [3.0, 8.0])
    y, s = branchy(-x, w)
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0])
    assert kiln.cond(False, lambda: 1, lambda: 2) == 2


def test_traced_cond_takes_either_branch_per_call():
    w = kiln.tensor([3.0, 4.0])
    traced = kiln.jit.trace(lambda x: branchy(x, w), kiln.tensor([1.0, 2.0]))
    assert op_names(traced.graph).count("cond") == 1
    for x in ([1.0, 2.0], [-1.0, -5.0], [0.0, 0.0]):
        want = branchy(kiln.tensor(x), w)
        got = traced(kiln.tensor(x))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_pytrees_in_and_out():
    def fn(state):
        return kiln.cond(state["x"].sum() > 0,
                         lambda s: {"x": s["x"] * 2, "n": [s["n"] + 1]},
                         lambda s: {"x": s["x"] - 1, "n": [s["n"]]},
                         state)
    out = kiln.compile(lambda x, n: fn({"x": x, "n": n}))(kiln.tensor([1.0]), kiln.tensor(0))
    assert set(out) == {"x", "n"} and isinstance(out["n"], list)
    np.testing.assert_array_equal(out["x"].numpy(), [2.0])


def test_while_loop_runs_the_number_of_iterations_each_input_needs():
    def doubling(x, limit):
        return kiln.while_loop(lambda s: s[0].sum() < limit, lambda s: (s[0] * 2, s[1] + 1),
                               (x, kiln.tensor(0)))

    f = kiln.compile(doubling)
    for x, limit in (([1.0, 1.0], 10.0), ([1.0, 1.0], 1000.0), ([5.0, 5.0], 1.0)):
        want = doubling(kiln.tensor(x), kiln.tensor(limit))
        got = f(kiln.tensor(x), kiln.tensor(limit))
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
        assert got[1].item() == want[1].item()


def test_while_loop_max_iterations_is_enforced_eager_and_compiled():
    def runaway(x):
        return kiln.while_loop(lambda v: v.sum() < 100, lambda v: v + 1, x, max_iterations=5)

    with pytest.raises(RuntimeError, match="exceeded max_iterations=5"):
        runaway(kiln.zeros(1))
    traced = kiln.jit.trace(runaway, kiln.full((1,), 97.0))
    with pytest.raises(RuntimeError, match="exceeded max_iterations=5"):
        traced(kiln.zeros(1))


def test_scan_is_one_node_and_matches_eager():
    w = kiln.randn(3, 3) * 0.5

    def rnn(h0, xs):
        return kiln.scan(lambda h, x: ((h @ w + x).tanh(),) * 2, h0, xs)

    h0, xs = kiln.randn(2, 3), kiln.randn(6, 2, 3)
    traced = kiln.jit.trace(rnn, (h0, xs))
    assert op_names(traced.graph).count("scan") == 1
    want_h, want_ys = rnn(h0, xs)
    got_h, got_ys = traced(h0, xs)
    np.testing.assert_array_equal(got_h.numpy(), want_h.numpy())
    np.testing.assert_array_equal(got_ys.numpy(), want_ys.numpy())
    assert got_ys.shape == (6, 2, 3)


def test_scan_reverse_and_length_without_xs():
    carry, ys = kiln.scan(lambda c, x: (c * 10 + x, c), kiln.tensor(0.0),
                          kiln.tensor([1.0, 2.0, 3.0]), reverse=True)
    assert carry.item() == 321.0
    np.testing.assert_array_equal(ys.numpy(), [32.0, 3.0, 0.0])
    count, none = kiln.scan(lambda c, _: (c + 1, None), kiln.tensor(0), length=4)
    assert count.item() == 4 and none is None


def test_fori_loop_static_and_tensor_bounds():
    def static(x):
        return kiln.fori_loop(0, 5, lambda i, v: v + i.float(), x)

    def dynamic(x, n):
        return kiln.fori_loop(0, n, lambda i, v: v * 2, x)

    x = kiln.tensor([1.0, 2.0])
    assert "scan" in op_names(kiln.jit.trace(static, x).graph)
    np.testing.assert_array_equal(kiln.compile(static)(x).numpy(), [11.0, 12.0])
    f = kiln.compile(dynamic)
    for n in (0, 3, 7):
        np.testing.assert_array_equal(f(x, kiln.tensor(n)).numpy(), dynamic(x, n).numpy())


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return kiln.cond(x.mean() > 0, lambda v: self.fc(v).relu(), lambda v: self.fc(-v), x)


def test_hybridized_module_reads_its_weights_inside_a_branch():
    m = Gate()
    eager = [m(x) for x in (kiln.ones(2, 4), -kiln.ones(2, 4))]
    m.hybridize()
    for x, want in zip((kiln.ones(2, 4), -kiln.ones(2, 4)), eager):
        with kiln.no_grad():
            np.testing.assert_allclose(m(x).numpy(), want.detach().numpy(), rtol=1e-6)


def grads(fn, *inputs):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out = out if isinstance(out, tuple) else (out,)
    sum(o.sum() * (k + 1) for k, o in enumerate(out)).backward()
    # An input the taken path never read has no grad eagerly: zeros.
    return [np.zeros(leaf.shape) if leaf.grad is None else leaf.grad.numpy() for leaf in leaves]


def test_gradients_through_compiled_cond_and_scan_equal_eager():
    def f(x, w):
        y = kiln.cond(x.sum() > 0, lambda v: v * v * w, lambda v: (v + w).sin(), x)
        h, hs = kiln.scan(lambda h, x_t: ((h * w + x_t).tanh(),) * 2, y, kiln.stack([x, y, x]))
        return h, hs

    x = kiln.tensor([0.5, -0.25, 1.0], dtype=kiln.float64)
    w = kiln.tensor([1.5, 0.5, -1.0], dtype=kiln.float64)
    traced = kiln.jit.trace(f, (x, w))
    for sign in (1.0, -1.0):
        want = grads(f, x * sign, w)
        got = grads(traced, x * sign, w)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10)


def test_errors_name_the_mismatch_and_the_users_line():
    def bad(x):
        return kiln.cond(x.sum() > 0, lambda v: v, lambda v: v.sum(), x)

    with pytest.raises(TypeError, match=r"cond: result 0 is float32\[3\] from true_fn but "
                                        r"float32\[\] from false_fn.*test_control_flow.py:\d+"):
        kiln.jit.trace(bad, kiln.ones(3))
    with pytest.raises(TypeError, match="one-element bool tensor.*test_control_flow.py"):
        kiln.cond(kiln.ones(2) > 0, lambda v: v, lambda v: v, kiln.ones(2))
    with pytest.raises(TypeError, match=r"true_fn returned \(tensor, tensor\) but false_fn "
                                        r"returned \[tensor, tensor\]"):
        kiln.jit.trace(lambda x: kiln.cond(x.sum() > 0, lambda v: (v, v), lambda v: [v, v], x),
                       kiln.ones(2))


def test_the_readme_prints_the_graph_script_makes():
    """The README shows a scripted loop's IR: it must be what kiln prints."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("### Control flow in the graph")[1]
    printed = "graph(" + section.split("```\ngraph(")[1].split("```")[0]

    @kiln.jit.script
    def f(x, n):
        for i in range(n):  # noqa: B007  (as the README writes it)
            if x.sum() > 0:
                x = x * 0.5
            else:
                x = x + 1
        return x

    traced = kiln.jit.trace(f, (kiln.ones(4), kiln.tensor(3)))
    assert str(traced.graph) == printed
    np.testing.assert_array_equal(traced(-kiln.ones(4), kiln.tensor(5)).numpy(),
                                  f(-kiln.ones(4), kiln.tensor(5)).numpy())


def test_a_hybridized_model_with_a_cond_trains_with_eagers_gradients():
    x = kiln.randn(3, 4)
    eager = Gate()
    hybrid = Gate()
    hybrid.load_state_dict(eager.state_dict())
    hybrid.hybridize()
    for sign in (1.0, -1.0, 1.0):  # the first call records; the others run compiled
        for model in (eager, hybrid):
            model.zero_grad()
            (model(x * sign) ** 2).sum().backward()
        np.testing.assert_allclose(hybrid.fc.weight.grad.numpy(), eager.fc.weight.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)


def train_steps(model, forward, compiled, steps=3):
    """SGD steps of (forward(model, x) - target)^2, eager or as one compiled
    step (forward, backward and update); the losses and final weights."""
    kiln.manual_seed(1)
    xs = [kiln.randn(3, 4) * (1.0 - 0.75 * k) for k in range(steps)]
    target = kiln.randn(3, 4)
    opt = kiln.optim.SGD(model.parameters(), lr=0.05)

    def step(x):
        opt.zero_grad()
        loss = ((forward(model, x) - target) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = kiln.compile(step) if compiled else step
    losses = [run(x).item() for x in xs]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def bounded_growth(model, x):
    h = model(x)
    return kiln.while_loop(lambda v: v.abs().sum() < 8.0, lambda v: model.fc(v) * 0.1 + v * 2, h,
                           max_iterations=40)


def lstm_over_rows(model, x):
    return model(x.reshape(1, 3, 4))[0].reshape(3, 4)


@pytest.mark.parametrize("make, forward", [
    (Gate, lambda m, x: m(x)),
    (Gate, bounded_growth),
    (lambda: nn.LSTM(4, 4, num_layers=2, batch_first=True), lstm_over_rows),
], ids=["cond", "cond+while_loop", "lstm"])
def test_a_compiled_training_step_through_control_flow_equals_eager_steps(make, forward):
    """backward() inside kiln.compile reaches through cond, while_loop and
    scan: their recorded nodes carry a backward that is control flow again."""
    eager, compiled = make(), make()
    compiled.load_state_dict(eager.state_dict())
    want_losses, want = train_steps(eager, forward, compiled=False)
    got_losses, got = train_steps(compiled, forward, compiled=True)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_gradients_through_a_bounded_compiled_while_loop_equal_eager():
    def f(x, w):
        return kiln.while_loop(lambda s: s[0].abs().sum() < 6, lambda s: ((s[0] @ w).tanh()
                                                                          + s[0] * 1.5, s[1] + 1),
                               (x, kiln.tensor(0)), max_iterations=7)[0]

    x = kiln.tensor([[0.5, -0.25]], dtype=kiln.float64)
    w = kiln.tensor([[0.5, 0.1], [-0.3, 0.8]], dtype=kiln.float64)
    traced = kiln.jit.trace(f, (x, w))
    for scale in (0.05, 1.0, 10.0):  # 7 iterations (the bound), 3, none
        want = grads(f, x * scale, w)
        got = grads(traced, x * scale, w)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10)


def test_a_while_loop_without_a_bound_runs_compiled_but_says_how_to_differentiate():
    f = kiln.jit.trace(lambda x: kiln.while_loop(lambda v: v.sum() < 10, lambda v: v * 2, x),
                       kiln.ones(2))
    out = f(kiln.ones(2).requires_grad_())
    np.testing.assert_array_equal(out.detach().numpy(), [8.0, 8.0])
    with pytest.raises(RuntimeError, match="no gradient without max_iterations"):
        out.sum().backward()


def test_a_tensor_kept_from_inside_a_loop_body_is_refused():
    kept = []

    def body(v):
        kept.append(v * 2)
        return v + 1

    @kiln.compile
    def f(x):
        y = kiln.while_loop(lambda v: v.sum() < 5, body, x)
        return y + kept[-1]

    with pytest.raises(RuntimeError, match="computed inside kiln.cond, while_loop or scan"):
        f(kiln.zeros(2))
