"""kiln.autograd.functional against torch.autograd.functional: vjp, jvp,
jacobian, hessian, vhp and hvp on functions of one and of several tensors,
with create_graph on and off, and their errors."""
import numpy as np
import pytest
import torch

import kiln

KF, TF = kiln.autograd.functional, torch.autograd.functional


def pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape)
    return kiln.tensor(a), torch.tensor(a)


def assert_same(k, t, path="result"):
    if isinstance(t, tuple):
        assert isinstance(k, tuple) and len(k) == len(t), (path, type(k))
        for i, (a, b) in enumerate(zip(k, t)):
            assert_same(a, b, f"{path}[{i}]")
        return
    assert tuple(k.shape) == tuple(t.shape), path
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=path)


# A vector function of one tensor, one of two tensors with two outputs, and
# scalar functions for the Hessians. Each takes the library's tensors.
def vector_fn(x):
    return (x.sin() * x).cumsum(0)


def two_in_two_out(x, y):
    return x * y.exp(), (x * x).sum() + y.tanh()


def scalar_fn(x):
    return (x.sin() * x * x).sum()


def scalar_of_two(x, y):
    return (x.sum() * y.exp()).sum() + (x * x).sum() * y.sin().sum()


def args(seed, shapes):
    ks, ts = zip(*(pair(s, seed + i) for i, s in enumerate(shapes)))
    return ks, ts


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp_and_jvp(create_graph):
    (kx,), (tx,) = args(0, [(4,)])
    (kv,), (tv,) = args(10, [(4,)])
    assert_same(KF.vjp(vector_fn, kx, kv, create_graph=create_graph),
                TF.vjp(vector_fn, tx, tv, create_graph=create_graph))
    assert_same(KF.jvp(vector_fn, kx, kv, create_graph=create_graph),
                TF.jvp(vector_fn, tx, tv, create_graph=create_graph))
    ki, ti = args(1, [(3,), (3,)])
    kv2, tv2 = args(11, [(3,), (3,)])
    assert_same(KF.jvp(two_in_two_out, ki, kv2), TF.jvp(two_in_two_out, ti, tv2))
    kw, tw = args(12, [(3,), (3,)])
    assert_same(KF.vjp(two_in_two_out, ki, kw), TF.vjp(two_in_two_out, ti, tw))
    # v may be left out for a one-element function (vjp) or input (jvp).
    assert_same(KF.vjp(scalar_fn, kx), TF.vjp(scalar_fn, tx))


@pytest.mark.parametrize("create_graph", [False, True])
def test_jacobian(create_graph):
    (kx,), (tx,) = args(2, [(2, 3)])
    assert_same(KF.jacobian(lambda x: x.tanh() * x.sum(), kx, create_graph=create_graph),
                TF.jacobian(lambda x: x.tanh() * x.sum(), tx, create_graph=create_graph))
    ki, ti = args(3, [(3,), (3,)])
    assert_same(KF.jacobian(two_in_two_out, ki, vectorize=True),
                TF.jacobian(two_in_two_out, ti, vectorize=True))
    # An output that does not depend on an input: zeros there.
    assert_same(KF.jacobian(lambda x, y: x * 2, ki), TF.jacobian(lambda x, y: x * 2, ti))


def test_hessian_vhp_hvp():
    (kx,), (tx,) = args(4, [(3,)])
    assert_same(KF.hessian(scalar_fn, kx), TF.hessian(scalar_fn, tx))
    ki, ti = args(5, [(2,), (3,)])
    assert_same(KF.hessian(scalar_of_two, ki), TF.hessian(scalar_of_two, ti))
    kv, tv = args(6, [(2,), (3,)])
    for name in ("vhp", "hvp"):
        for create_graph in (False, True):
            assert_same(getattr(KF, name)(scalar_of_two, ki, kv, create_graph=create_graph),
                        getattr(TF, name)(scalar_of_two, ti, tv, create_graph=create_graph))


def test_create_graph_keeps_the_inputs_history():
    for lib, F in ((kiln, KF), (torch, TF)):
        x = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        _, hv = F.hvp(scalar_fn, x, lib.ones(2, dtype=lib.float64), create_graph=True)
        hv.sum().backward()  # a third derivative
        if lib is kiln:
            k_grad = x.grad.numpy()
        else:
            np.testing.assert_allclose(k_grad, x.grad.numpy(), rtol=1e-10)
        _, plain = F.vjp(scalar_fn, x)
        assert not plain.requires_grad


def test_errors():
    kx, _ = pair((3,), 7)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                           "function returns a single Tensor with a single "
                                           "element"):
        KF.vjp(vector_fn, kx)
    with pytest.raises(RuntimeError, match="v has invalid size: should be \\(3,\\) but got"):
        KF.vjp(vector_fn, kx, kiln.ones(2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        KF.hvp(lambda x: (x.sum(), x.sum()), kx, kx)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        KF.jacobian(vector_fn, [kx])
    with pytest.raises(RuntimeError, match="independent of input 1"):
        KF.vjp(lambda x, y: (x * 2).sum(), (kx, kx), strict=True)
