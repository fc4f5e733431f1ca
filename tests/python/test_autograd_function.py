"""kiln.autograd.Function against torch.autograd.Function: the same Function
source is built over both libraries (functions_for(lib)), and outputs,
gradients, ctx behavior and errors are compared. Then gradcheck and
gradgradcheck, and Functions in graphs recorded for inference (under no_grad);
test_autograd_function_compiled.py records them with grad mode on."""
import warnings

import numpy as np
import pytest
import torch

import kiln


def functions_for(lib):
    """The custom Functions of these tests, written once, over `lib`
    (kiln or torch)."""
    Function = lib.autograd.Function

    class MulAdd(Function):
        """(x * y * alpha, x + y); alpha a Python number."""
        @staticmethod
        def forward(ctx, x, y, alpha):
            ctx.save_for_backward(x, y)
            ctx.alpha = alpha
            ctx.seen_needs = ctx.needs_input_grad
            return x * y * alpha, x + y

        @staticmethod
        def backward(ctx, g_prod, g_sum):
            x, y = ctx.saved_tensors
            gx = g_prod * y * ctx.alpha + g_sum if ctx.needs_input_grad[0] else None
            gy = g_prod * x * ctx.alpha + g_sum if ctx.needs_input_grad[1] else None
            return gx, gy, None

    class Exp(Function):
        """Saves its output: differentiable again through the saved output."""
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class ClampGrad(Function):
        """Identity forward, a backward unlike the forward's derivative."""
        @staticmethod
        def forward(ctx, x, bound):
            ctx.bound = bound
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clamp(-ctx.bound, ctx.bound), None

    class WithCount(Function):
        """A non-tensor output: backward gets None in its place."""
        @staticmethod
        def forward(ctx, x):
            return x * 3, 7, x * 2

        @staticmethod
        def backward(ctx, g0, g_count, g2):
            assert g_count is None
            return g0 * 3 + g2 * 2

    class SignAndAbs(Function):
        """A non-differentiable output; materialize switchable."""
        @staticmethod
        def forward(ctx, x, materialize):
            sign = x.sign()
            ctx.mark_non_differentiable(sign)
            ctx.set_materialize_grads(materialize)
            ctx.save_for_backward(sign)
            return x.abs(), sign

        @staticmethod
        def backward(ctx, g_abs, g_sign):
            (sign,) = ctx.saved_tensors
            ctx.arrived = (g_abs is not None, g_sign is not None)
            return None if g_abs is None else g_abs * sign, None

    class DoubleInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class Square(Function):
        """forward + setup_context, the style torch 2 added."""
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    return dict(MulAdd=MulAdd, Exp=Exp, ClampGrad=ClampGrad, WithCount=WithCount,
                SignAndAbs=SignAndAbs, DoubleInPlace=DoubleInPlace, Identity=Identity,
                Square=Square)


K, T = functions_for(kiln), functions_for(torch)


def pair(shape, seed, requires_grad=True, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (kiln.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def close(k, t, tol=1e-10):
    assert (k is None) == (t is None), (k, t)
    if k is not None:
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("y_requires_grad", [True, False])
def test_mul_add_outputs_gradients_and_needs_input_grad(y_requires_grad):
    kx, tx = pair((2, 3), 0)
    ky, ty = pair((2, 3), 1, requires_grad=y_requires_grad)
    kout = K["MulAdd"].apply(kx, ky, 1.5)
    tout = T["MulAdd"].apply(tx, ty, 1.5)
    assert kout[0]._grad_fn_name == type(tout[0].grad_fn).__name__ == "MulAddBackward"
    for k, t in zip(kout, tout):
        close(k, t)
    (kout[0] * kout[1]).sum().backward()
    (tout[0] * tout[1]).sum().backward()
    close(kx.grad, tx.grad)
    close(ky.grad, ty.grad)


def test_the_users_backward_is_used():
    kx, tx = pair((5,), 2)
    (K["ClampGrad"].apply(kx, 0.5) * 3).sum().backward()
    (T["ClampGrad"].apply(tx, 0.5) * 3).sum().backward()
    close(kx.grad, tx.grad)
    assert np.all(np.abs(kx.grad.numpy()) <= 0.5)


def test_non_tensor_output_and_setup_context():
    kx, tx = pair((3,), 3)
    kout, tout = K["WithCount"].apply(kx), T["WithCount"].apply(tx)
    assert kout[1] == tout[1] == 7
    (kout[0] + kout[2]).sum().backward()
    (tout[0] + tout[2]).sum().backward()
    close(kx.grad, tx.grad)
    kz, tz = pair((3,), 4)
    K["Square"].apply(kz).sum().backward()
    T["Square"].apply(tz).sum().backward()
    close(kz.grad, tz.grad)


@pytest.mark.parametrize("materialize", [True, False])
def test_non_differentiable_outputs_and_materialized_grads(materialize):
    kx, tx = pair((4,), 5)
    k_abs, k_sign = K["SignAndAbs"].apply(kx, materialize)
    t_abs, t_sign = T["SignAndAbs"].apply(tx, materialize)
    assert k_sign.requires_grad == t_sign.requires_grad is False
    k_abs.sum().backward()
    t_abs.sum().backward()
    close(kx.grad, tx.grad)


def test_dirty_inputs_and_returned_inputs():
    kx, tx = pair((3,), 6)
    ka, ta = kx * 1, tx * 1
    kout, tout = K["DoubleInPlace"].apply(ka), T["DoubleInPlace"].apply(ta)
    assert kout is ka and tout is ta
    close(ka, ta)
    (ka * ka).sum().backward()
    (ta * ta).sum().backward()
    close(kx.grad, tx.grad)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        K["DoubleInPlace"].apply(kiln.ones(2, requires_grad=True))

    kb, tb = pair((3,), 7)
    k_alias, t_alias = K["Identity"].apply(kb), T["Identity"].apply(tb)
    assert k_alias is not kb and t_alias is not tb
    k_alias.sum().backward()
    t_alias.sum().backward()
    close(kb.grad, tb.grad)


def test_double_backward_through_saved_output():
    kx, tx = pair((3,), 8)
    (kg,) = kiln.autograd.grad(K["Exp"].apply(kx).sum(), kx, create_graph=True)
    (tg,) = torch.autograd.grad(T["Exp"].apply(tx).sum(), tx, create_graph=True)
    close(kg, tg)
    (kg * kg).sum().backward()
    (tg * tg).sum().backward()
    close(kx.grad, tx.grad)


def test_errors_match_torch():
    def wrong(lib, rule, shape=(2, 3)):
        class Wrong(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return rule(g)
        x = lib.ones(*shape, requires_grad=True, dtype=lib.float64)
        Wrong.apply(x).sum().backward()
        return x.grad

    for rule, message in [
        (lambda g: (g, g), r"function WrongBackward returned an incorrect number of gradients "
                           r"\(expected 1, got 2\)"),
        (lambda g: g.sum(), r"returned an invalid gradient at index 0 - got \[\] but expected "
                            r"shape compatible with \[2, 3\]"),
    ]:
        for lib in (kiln, torch):
            with pytest.raises(RuntimeError, match=message):
                wrong(lib, rule)
    # A broadcast gradient is summed back to the input's shape, as torch does.
    close(wrong(kiln, lambda g: g.expand(4, 3), (3,)), wrong(torch, lambda g: g.expand(4, 3), (3,)))


def test_saved_tensors_are_checked_and_freed():
    for lib, F in ((kiln, K), (torch, T)):
        x = lib.ones(3, requires_grad=True, dtype=lib.float64)
        a = x * 1
        y = F["MulAdd"].apply(a, a, 2.0)[0]
        a.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
        y = F["Exp"].apply(x)
        y.sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        class SavesANumber(kiln.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x
        SavesANumber.apply(kiln.ones(1))


def test_function_trains_a_module_like_torch():
    """Several SGD steps of a model whose nonlinearity is a custom Function."""
    def model(lib, F):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.fc2 = lib.nn.Linear(4, 5), lib.nn.Linear(5, 1)

            def forward(self, x):
                return self.fc2(F["MulAdd"].apply(self.fc1(x), self.fc1(x), 0.5)[0])
        return Net()
    tnet, knet = model(torch, T), model(kiln, K)
    knet.load_state_dict({k: v.detach().numpy() for k, v in tnet.state_dict().items()})
    topt = torch.optim.SGD(tnet.parameters(), lr=0.05)
    kopt = kiln.optim.SGD(knet.parameters(), lr=0.05)
    rng = np.random.default_rng(9)
    for _ in range(4):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        for net, opt, lib in ((tnet, topt, torch), (knet, kopt, kiln)):
            opt.zero_grad()
            (net(lib.tensor(x)) ** 2).mean().backward()
            opt.step()
    for (name, tp), kp in zip(tnet.named_parameters(), knet.parameters()):
        np.testing.assert_allclose(kp.detach().numpy(), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=name)


# -- gradcheck --------------------------------------------------------------
def test_gradcheck_passes_a_correct_function_and_fails_a_wrong_one():
    x, _ = pair((3,), 10)
    y, _ = pair((3,), 11)
    assert kiln.autograd.gradcheck(lambda a, b: K["MulAdd"].apply(a, b, 0.7), (x, y))
    assert kiln.autograd.gradcheck(K["Exp"].apply, x, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert kiln.autograd.gradgradcheck(K["Exp"].apply, (x,))

    class WrongExp(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be g * exp(x)
    with pytest.raises(kiln.autograd.GradcheckError, match="Jacobian mismatch for output 0 "
                                                           "with respect to input 0"):
        kiln.autograd.gradcheck(WrongExp.apply, (x,))
    assert kiln.autograd.gradcheck(WrongExp.apply, (x,), raise_exception=False) is False
    assert kiln.autograd.gradcheck(K["ClampGrad"].apply, (x * 0.1, 10.0))

    class OnceExp(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        @kiln.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.exp()
    assert kiln.autograd.gradcheck(OnceExp.apply, (x,))
    assert kiln.autograd.gradgradcheck(OnceExp.apply, (x,), raise_exception=False) is False


@pytest.mark.parametrize("fn", [lambda a: (a.sin() * a).sum(dim=0), lambda a: a.softmax(-1)])
def test_gradcheck_agrees_with_torch_on_builtin_ops(fn):
    k, t = pair((2, 3), 12)
    assert kiln.autograd.gradcheck(fn, (k,))
    assert torch.autograd.gradcheck(fn, (t,))
    assert kiln.autograd.gradgradcheck(fn, (k,))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        kiln.autograd.gradcheck(lambda a: a * 2, (kiln.ones(2, dtype=kiln.float64),))


# -- recorded graphs ----------------------------------------------------------
class FunctionNet(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = kiln.nn.Linear(3, 2)

    def forward(self, x):
        return K["ClampGrad"].apply(self.fc(x), 0.1).exp()


def test_inference_records_the_forward_exactly():
    net = FunctionNet()
    x = kiln.randn(4, 3)
    kiln.autograd.function._warned_inference_records.discard("ClampGrad")  # once per process
    with kiln.no_grad():
        expected = net(x)
        net.hybridize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, second = net(x), net(x)  # records, then runs the compiled entry
            traced = kiln.jit.trace(FunctionNet(), x)
    assert any("ClampGrad was recorded under no_grad" in str(w.message) for w in caught)
    np.testing.assert_array_equal(first.numpy(), expected.numpy())
    np.testing.assert_array_equal(second.numpy(), expected.numpy())
    assert "exp" in str(traced.graph)


def test_a_no_grad_trace_records_the_forward_and_refuses_its_gradient(tmp_path):
    """Under no_grad the trace holds the Function's forward ops, and so can be
    saved and exported; with grad mode on it would hold one custom_function
    node instead (test_autograd_function_compiled.py)."""
    net = FunctionNet()
    x = kiln.randn(4, 3)
    with kiln.no_grad():
        traced = kiln.jit.trace(net, x)
    with kiln.no_grad():
        np.testing.assert_array_equal(traced(x).numpy(), net(x).numpy())
    with pytest.raises(RuntimeError, match="holds the forward of the custom autograd Function "
                                           "ClampGrad, not its backward"):
        traced(x)  # the parameters require grad
    traced.save(tmp_path / "net.kiln")
    loaded = kiln.jit.load(tmp_path / "net.kiln")
    with pytest.raises(RuntimeError, match="ClampGrad"):
        loaded(kiln.randn(4, 3, requires_grad=True))
    with kiln.no_grad():
        np.testing.assert_array_equal(loaded(x).numpy(), net(x).numpy())
    kiln.onnx.export(net, (x,), tmp_path / "net.onnx", verify=True)


def test_graphs_through_functions_are_freed():
    """A saved output, a dirty input and ctx attributes make no reference
    cycle: all of it is freed with the last tensor."""
    import gc

    def step():
        x = kiln.randn(64, dtype=kiln.float64, requires_grad=True)
        a = K["DoubleInPlace"].apply(x * 1)
        y = K["Exp"].apply(a)
        z = K["MulAdd"].apply(y, a, 2.0)[0]
        z.sum().backward(retain_graph=True)
        return z  # dropped by the caller, graph retained until then

    step()
    gc.collect()
    live = kiln._C._allocator_live_bytes()
    for _ in range(3):
        step()
    gc.collect()
    assert kiln._C._allocator_live_bytes() == live


def test_an_output_kept_on_ctx_is_warned_about():
    contexts = []

    class KeepsOutput(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.out = x * 2
            contexts.append(ctx)
            return ctx.out

        @staticmethod
        def backward(ctx, g):
            return g * 2
    with pytest.warns(UserWarning, match="keeps an output as ctx.out: it will never be freed"):
        KeepsOutput.apply(kiln.ones(2, requires_grad=True))
    contexts[0].out = None  # breaks the cycle the warning is about


def test_grad_fn_names_the_graph_like_torch():
    def graph(lib, F):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        y = F["Exp"].apply(x * 2)
        fn = y.grad_fn
        below = fn.next_functions[0][0]
        return [fn.name(), below.name(), below.next_functions[0][0].name(),
                lib.ones(2).grad_fn is None]
    k, t = graph(kiln, K), graph(torch, T)
    assert k[0] == t[0] == "ExpBackward"
    assert k[2] == "AccumulateGrad" and t[2] == "torch::autograd::AccumulateGrad"
    assert k[3] and t[3]
    assert k[1] == "MulBackward0" and t[1] == "MulBackward0"
