"""Tensor hooks (register_hook, retain_grad) and Module hooks (forward
pre-hooks, forward hooks, full backward hooks and pre-hooks) against torch:
the order hooks run in, the arguments they get and what replacing a value
does, on the same models in both libraries."""
import gc

import numpy as np
import pytest
import torch

import kiln


def as_numpy(x):
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return [as_numpy(item) for item in x]
    return x.detach().numpy().copy()


def assert_same(k, t, path="value"):
    if isinstance(t, list):
        assert isinstance(k, list) and len(k) == len(t), (path, k, t)
        for i, (a, b) in enumerate(zip(k, t)):
            assert_same(a, b, f"{path}[{i}]")
        return
    assert (k is None) == (t is None), (path, k, t)
    if t is not None:
        np.testing.assert_allclose(k, t, rtol=1e-5, atol=1e-6, err_msg=path)


def leaf(lib, values, requires_grad=True):
    return lib.tensor(np.asarray(values, dtype=np.float32), requires_grad=requires_grad)


# -- tensor hooks -------------------------------------------------------------
def tensor_hook_run(lib):
    events = []
    x = leaf(lib, [1.0, -2.0, 3.0])
    y = x * 2
    z = y * y + y  # y used twice: its hooks see the summed gradient
    y.register_hook(lambda g: events.append(("y1", as_numpy(g))))
    y.register_hook(lambda g: g * 3)
    y.retain_grad()
    y.register_hook(lambda g: events.append(("y3", as_numpy(g))))
    removed = x.register_hook(lambda g: events.append(("never", None)))
    removed.remove()
    x.register_hook(lambda g: (events.append(("x", as_numpy(g))), g + 1)[1])
    z.sum().backward()
    events.append(("y.grad", as_numpy(y.grad)))
    events.append(("x.grad", as_numpy(x.grad)))
    events.append(("flags", [y.retains_grad, x.retains_grad, y.is_leaf]))
    return events


def test_tensor_hooks_match_torch():
    k_events, t_events = tensor_hook_run(kiln), tensor_hook_run(torch)
    assert [e[0] for e in k_events] == [e[0] for e in t_events]
    for (name, k), (_, t) in zip(k_events, t_events):
        if name == "flags":
            assert k == t
        else:
            assert_same(k, t, name)


def test_hooks_see_grad_inputs_and_retained_grads_accumulate():
    for lib in (kiln, torch):
        x = leaf(lib, [1.0, 2.0])
        x.register_hook(lambda g: g * 10)
        (g,) = lib.autograd.grad((x * x).sum(), x)  # hooked before it is returned
        np.testing.assert_allclose(g.numpy(), [20.0, 40.0])
        y = x * 3
        y.retain_grad()
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), [2.0, 2.0])  # accumulates
        x.retain_grad()  # a no-op on a leaf
        assert not x.retains_grad
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that "
                                               "doesn't require gradient"):
            lib.ones(2).register_hook(lambda g: g)


def test_hook_outlives_the_tensor_and_handle_is_a_context_manager():
    x = leaf(kiln, [1.0])
    calls = []
    y = x * 2
    with y.register_hook(lambda g: calls.append(1)):
        out = y * 5
        del y
        out.sum().backward(retain_graph=True)
    out.sum().backward()
    assert calls == [1]  # removed on leaving the with block


def test_a_hook_must_keep_the_shape():
    x = leaf(kiln, [1.0, 2.0])
    x.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="a hook changed the shape of the gradient"):
        (x * 2).sum().backward()


# -- module hooks ---------------------------------------------------------------
def small_model(lib, seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    if lib is torch:
        return t
    k = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.ReLU(), kiln.nn.Linear(4, 2))
    k.load_state_dict({name: v.detach().numpy() for name, v in t.state_dict().items()})
    return k


def record_all_hooks(model):
    events = []
    for name, m in model.named_modules():
        name = name or "top"
        m.register_forward_pre_hook(
            lambda mod, args, name=name: events.append(("pre", name, as_numpy(args))))
        m.register_forward_hook(
            lambda mod, args, out, name=name: events.append(("fwd", name, as_numpy(out))))
        m.register_full_backward_pre_hook(
            lambda mod, go, name=name: events.append(("bwd_pre", name, as_numpy(go))))
        m.register_full_backward_hook(
            lambda mod, gi, go, name=name: events.append(("bwd", name, as_numpy([gi, go]))))
    return events


def compare_events(k_events, t_events):
    assert [e[:2] for e in k_events] == [e[:2] for e in t_events]
    for k, t in zip(k_events, t_events):
        assert_same(k[2], t[2], f"{t[0]} {t[1]}")


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_module_hooks_order_and_arguments_match_torch(input_requires_grad):
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    runs = {}
    for lib in (kiln, torch):
        model = small_model(lib)
        events = record_all_hooks(model)
        out = model(lib.tensor(x, requires_grad=input_requires_grad))
        (out * out).sum().backward()
        runs[lib.__name__] = events, [as_numpy(p.grad) for p in model.parameters()]
    compare_events(runs["kiln"][0], runs["torch"][0])
    assert_same(runs["kiln"][1], runs["torch"][1], "grads")


def replacing_run(lib):
    model = small_model(lib, seed=2)
    first, relu, last = model[0], model[1], model[2]
    first.register_forward_pre_hook(lambda mod, args: args[0] * 2)  # a non-tuple
    relu.register_forward_hook(lambda mod, args, out: out + 0.5)
    last.register_full_backward_pre_hook(lambda mod, go: (go[0] * -1,))
    relu.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
    seen = []
    first.register_full_backward_hook(lambda mod, gi, go: seen.append(as_numpy([gi, go])))
    x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    out = model(x)
    out.sum().backward()
    return [as_numpy(out), as_numpy(x.grad), seen] + [as_numpy(p.grad)
                                                      for p in model.parameters()]


def test_hooks_that_replace_values_match_torch():
    assert_same(replacing_run(kiln), replacing_run(torch))


class TwoInputs:
    """forward(x, scale, y): a number between tensors; y needs no grad."""

    @staticmethod
    def make(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = lib.nn.Linear(3, 3)

            def forward(self, x, scale, y, *, shift=0.0):
                return self.fc(x) * scale + y + shift, y * 2
        return Net()


def two_inputs_run(lib):
    torch.manual_seed(3)
    net = TwoInputs.make(lib)
    if lib is kiln:
        net.load_state_dict({k: v.detach().numpy()
                             for k, v in TwoInputs.make(torch).state_dict().items()})
    events = []
    net.register_forward_pre_hook(
        lambda mod, args, kwargs: ((args[0], 2.0, args[2]), {"shift": kwargs["shift"] + 1}),
        with_kwargs=True)
    net.register_forward_hook(
        lambda mod, args, kwargs, out: events.append(("fwd", [args[1], kwargs["shift"]])),
        with_kwargs=True)
    net.register_full_backward_pre_hook(
        lambda mod, go: events.append(("bwd_pre", as_numpy(list(go)))))
    net.register_full_backward_hook(
        lambda mod, gi, go: events.append(("bwd", as_numpy([list(gi), list(go)]))))
    x = lib.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    y = lib.tensor(np.full((2, 3), 0.5, np.float32))
    out, doubled = net(x, 1.0, y, shift=0.25)
    events.append(("out", as_numpy([out, doubled])))
    out.sum().backward()
    events.append(("x.grad", as_numpy(x.grad)))
    return events


def test_kwargs_hooks_and_non_tensor_arguments_match_torch():
    k, t = two_inputs_run(kiln), two_inputs_run(torch)
    assert [e[0] for e in k] == [e[0] for e in t]
    assert k[0] == t[0]  # ("fwd", [2.0, 1.25])
    for a, b in zip(k[1:], t[1:]):
        assert_same(a[1], b[1], a[0])


@pytest.mark.parametrize("lib", [kiln, torch], ids=["kiln", "torch"])
def test_prepend_always_call_and_removal(lib):
    if True:
        order = []
        m = lib.nn.Linear(2, 2)
        m.register_forward_hook(lambda *a: order.append("first"))
        handle = m.register_forward_hook(lambda *a: order.append("prepended"), prepend=True)
        m(lib.ones(1, 2))
        assert order == ["prepended", "first"]
        handle.remove()
        handle.remove()
        order.clear()
        m(lib.ones(1, 2))
        assert order == ["first"]

        m.register_forward_hook(lambda *a: order.append("always"), always_call=True)
        order.clear()
        with pytest.raises(RuntimeError):
            m(lib.ones(1, 5))  # wrong width: forward raises
        assert order == ["always"]


def test_removing_every_hook_restores_the_plain_call():
    m = kiln.nn.Linear(2, 2)
    handles = [m.register_forward_hook(lambda *a: None),
               m.register_full_backward_hook(lambda *a: None)]
    assert m._hooked
    for h in handles:
        h.remove()
    assert not m._hooked
    assert m(kiln.ones(1, 2)).shape == (1, 2)


def test_forward_hooks_around_a_hybridized_module():
    net = small_model(kiln)
    calls = []
    net.register_forward_hook(lambda mod, args, out: (calls.append(1), out * 2)[1])
    x = kiln.randn(4, 3)
    expected = small_model(kiln)(x) * 2
    net.hybridize()
    with kiln.no_grad():
        for _ in range(3):  # records, then runs the compiled entry
            np.testing.assert_allclose(net(x).numpy(), expected.detach().numpy(), rtol=1e-6)
    assert calls == [1, 1, 1]


def test_backward_hooks_free_their_graph():
    """No reference cycle through the hooks' Functions: everything a
    backward-hooked call made is freed once its tensors are gone."""
    model = small_model(kiln)
    record_all_hooks(model)
    x = kiln.randn(5, 3, requires_grad=True)
    model(x).sum().backward()  # warm-up: lazily made state stays
    gc.collect()
    live = kiln._C._allocator_live_bytes()
    for _ in range(3):
        out = model(x)
        out.sum().backward()
        del out
    model.zero_grad()
    x.grad = None
    gc.collect()
    assert kiln._C._allocator_live_bytes() <= live
