"""A custom kiln.autograd.Function in graphs recorded with grad mode on
(hybridize, kiln.compile, kiln.jit.trace): one custom_function node whose
backward is the Function's own. Training through the compiled graph gives
the eager losses and gradients (and torch's); the node refuses to leave the
process (save, ONNX export); what a node cannot hold is refused by name."""
import numpy as np
import pytest
import torch

import kiln
from test_autograd_function import functions_for

K, T = functions_for(kiln), functions_for(torch)


def build(lib, functions):
    """fc -> ClampGrad (a backward unlike the forward's derivative) ->
    MulAdd (two outputs, saved inputs, a Python number) -> a loss."""
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 3)
            self.gate = lib.nn.Linear(4, 3)

        def forward(self, x):
            h = functions["ClampGrad"].apply(self.fc(x), 0.05)
            prod, total = functions["MulAdd"].apply(h, self.gate(x).tanh(), 1.5)
            return (prod.sin() + total * total).mean()

    return Net()


def copy_into(kiln_net, torch_net):
    with torch.no_grad():
        for (_, k), (_, t) in zip(kiln_net.named_parameters(), torch_net.named_parameters()):
            t.copy_(torch.from_numpy(k.detach().numpy().copy()))


def train(net, xs, lib, run=None):
    """SGD steps; the losses and each step's gradients (run: a compiled
    step, or None for net's own forward and backward)."""
    opt = lib.optim.SGD(net.parameters(), lr=0.5)

    def step(x):
        opt.zero_grad()
        loss = net(x)
        loss.backward()
        grads = [p.grad.detach().clone() for p in net.parameters()]
        opt.step()
        return loss, grads

    losses, grads = [], []
    for x in xs:
        loss, g = run(x) if run is not None else step(x)
        losses.append(loss.item())
        grads.append([np.asarray(t.numpy()) for t in g])
    return losses, grads


def inputs(lib, steps=4):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.normal(size=(5, 4)).astype(np.float32)) for _ in range(steps)]


def test_hybridized_training_runs_the_functions_backward_like_eager_and_torch():
    kiln.manual_seed(0)
    eager = build(kiln, K)
    hybrid = build(kiln, K)
    hybrid.load_state_dict(eager.state_dict())
    reference = build(torch, T)
    copy_into(eager, reference)
    hybrid.hybridize()
    want_losses, want_grads = train(eager, inputs(kiln), kiln)
    got_losses, got_grads = train(hybrid, inputs(kiln), kiln)
    torch_losses, torch_grads = train(reference, inputs(torch), torch)
    assert hybrid.cache_info().hits == 3  # steps 2-4 ran the compiled graphs
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-6)
    np.testing.assert_allclose(got_losses, torch_losses, rtol=1e-5)
    for got, want, theirs in zip(got_grads, want_grads, torch_grads):
        for g, w, t in zip(got, want, theirs):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-6)
    # ClampGrad's backward bounds fc's gradients: the forward's derivative would not.
    assert np.abs(got_grads[0][1]).max() <= 0.05 * 5 + 1e-6


def test_a_compiled_training_step_with_a_function_equals_eager_steps():
    kiln.manual_seed(0)
    eager = build(kiln, K)
    compiled = build(kiln, K)
    compiled.load_state_dict(eager.state_dict())
    opt = kiln.optim.SGD(compiled.parameters(), lr=0.5)

    def step(x):
        opt.zero_grad()
        loss = compiled(x)
        loss.backward()
        opt.step()
        return loss, [p.grad for p in compiled.parameters()]

    want_losses, want_grads = train(eager, inputs(kiln), kiln)
    got_losses, got_grads = train(compiled, inputs(kiln), kiln, run=kiln.compile(step))
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-6)
    for got, want in zip(got_grads, want_grads):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    for p, q in zip(compiled.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)


class ClampNet(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = kiln.nn.Linear(3, 2)

    def forward(self, x):
        return K["ClampGrad"].apply(self.fc(x), 0.1).exp()


def test_a_trace_holds_one_node_and_differentiates_through_the_functions_backward():
    net = ClampNet()
    x = kiln.randn(4, 3)
    traced = kiln.jit.trace(net, x)  # grad mode on, as torch.jit.trace is called
    text = str(traced.graph)
    assert text.count("custom_function") == 1, text
    assert 'name="ClampGrad"' in text and "clone" not in text, text
    assert traced._custom_functions == ()  # nothing left to refuse
    _, backward = traced.grad_graphs(x)
    assert "clamp" in str(backward) and "custom_function" not in str(backward)  # its backward

    traced(x).sum().backward()
    got = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    net(x).sum().backward()
    want = [p.grad.numpy() for p in net.parameters()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert np.abs(got[0]).max() > 0 and np.abs(got[1]).max() <= 0.1 * 4 + 1e-6

    with kiln.no_grad():  # a compiled call runs the Function's forward
        y = kiln.randn(4, 3)
        np.testing.assert_array_equal(traced(y).numpy(), net(y).numpy())


def test_a_graph_with_the_node_is_neither_saved_nor_exported(tmp_path):
    net = ClampNet()
    x = kiln.randn(4, 3)
    traced = kiln.jit.trace(net, x)
    with pytest.raises(RuntimeError, match="save refused: the graph holds the custom autograd "
                                           "Function ClampGrad"):
        traced.save(tmp_path / "net.kiln")
    with pytest.raises(RuntimeError, match="onnx export refused: .* Function ClampGrad"):
        kiln.onnx.export(traced, (x,), tmp_path / "net.onnx")
    kiln.onnx.export(net, (x,), tmp_path / "net.onnx", verify=True)  # traced under no_grad


def test_a_saved_intermediate_is_a_hidden_output_of_the_node():
    class SiLU(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = x.sigmoid()
            ctx.save_for_backward(x, s)  # s is neither an input nor an output
            return x * s

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            return g * s * (1 + x * (1 - s))

    x = kiln.randn(5, dtype=kiln.float64, requires_grad=True)
    eager = kiln.autograd.grad(SiLU.apply(x).sum(), x)[0]
    step = kiln.compile(lambda v: kiln.autograd.grad(SiLU.apply(v).pow(2).sum(), v)[0])
    for _ in range(2):
        want = kiln.autograd.grad(SiLU.apply(x).pow(2).sum(), x)[0]
        np.testing.assert_allclose(step(x).numpy(), want.numpy(), rtol=1e-12)
    traced = kiln.jit.trace(lambda v: SiLU.apply(v), (x,))
    assert str(traced.graph).count("custom_function") == 1
    got = kiln.autograd.grad(traced(x).sum(), x)[0]
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), (x.sigmoid() * (1 + x * (1 - x.sigmoid())))
                               .detach().numpy(), rtol=1e-12)


def test_what_a_node_cannot_hold_is_refused_naming_the_function():
    x = kiln.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="DoubleInPlace: mark_dirty"):
        kiln.compile(lambda v: K["DoubleInPlace"].apply(v * 1.0))(x)


def test_symbolic_sizes_are_refused_naming_the_function():
    net = ClampNet()
    with pytest.raises(RuntimeError, match="autograd Function ClampGrad.*symbolic shape"):
        kiln.jit.trace(net, kiln.randn(4, 3), dynamic_shapes=[{0: "batch"}])


def test_non_differentiable_outputs_and_needs_input_grad_in_a_compiled_graph():
    """SignAndAbs marks its sign output non-differentiable: a gradient
    reaching it is not handed to backward; MulAdd skips y's gradient when
    y needs none."""
    def fn(x, y):
        a, sign = K["SignAndAbs"].apply(x, True)
        prod, total = K["MulAdd"].apply(a, y, 2.0)
        return (prod + total + sign * 3).sum()

    rng = np.random.default_rng(1)
    data = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    compiled = kiln.compile(fn)
    results = []
    for run in (fn, compiled):
        x = kiln.tensor(data[0], requires_grad=True)
        y = kiln.tensor(data[1])
        run(x, y).backward()
        results.append(x.grad.numpy())
    tx = torch.tensor(data[0], requires_grad=True)
    a, sign = T["SignAndAbs"].apply(tx, True)
    prod, total = T["MulAdd"].apply(a, torch.tensor(data[1]), 2.0)
    (prod + total + sign * 3).sum().backward()
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)
    np.testing.assert_allclose(results[1], tx.grad.numpy(), rtol=1e-12)


def test_module_backward_hooks_are_still_refused_in_a_recorded_graph():
    """A recorded graph would run the hooks once, when it records its
    backward graph, not on every backward."""
    net = ClampNet()
    net.fc.register_full_backward_hook(lambda module, grad_in, grad_out: None)
    net.hybridize()
    with pytest.raises(RuntimeError, match="Backward(Pre)?HookFunction: .* backward runs "
                                           "Python effects"):
        net(kiln.randn(4, 3))
