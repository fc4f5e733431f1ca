"""GroupNorm, InstanceNorm1d/2d and group_norm / instance_norm, and the
pointwise losses (BCELoss, SmoothL1Loss, HuberLoss, KLDivLoss,
CosineEmbeddingLoss) against torch's (issue 23): outputs and gradients over
several argument sets and every reduction, train/eval with the running
statistics over several steps, reprs, state_dict keys, errors, and that
the layers trace and hybridize to their eager result."""
import copy
import warnings

import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F
from nn_torch_helpers import (
    assert_close,
    check_traced_and_hybridized,
    compare,
    compare_modules,
    inputs,
    load_torch_weights,
    pair_of,
    seed_like,
)

TF = torch.nn.functional
BOTH = [np.float64, np.float32]
REDUCTIONS = ["none", "mean", "sum"]

# -- GroupNorm ----------------------------------------------------------------

GROUP_NORMS = [
    (dict(num_groups=3, num_channels=6), (2, 6, 5)),
    (dict(num_groups=2, num_channels=6, eps=1e-3), (2, 6, 3, 4)),
    (dict(num_groups=1, num_channels=6), (3, 6)),
    (dict(num_groups=6, num_channels=6, affine=False), (2, 6, 4)),
    (dict(num_groups=2, num_channels=6, bias=False), (2, 6, 2, 3)),
    (dict(num_groups=3, num_channels=3), (2, 3, 4, 1)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("kwargs, shape", GROUP_NORMS)
def test_group_norm_module_matches_torch(kwargs, shape, dtype):
    ours, theirs = nn.GroupNorm(**kwargs), torch.nn.GroupNorm(**kwargs)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs(shape, dtype), dtype)
    check_traced_and_hybridized(ours.float(), inputs(shape, np.float32))


def test_group_norm_of_one_value_per_group_is_its_bias():
    """x - mean is 0 there (torch's float32 gradient of it is rounding noise
    times 1 / sqrt(eps), so float64 only)."""
    ours, theirs = nn.GroupNorm(3, 3), torch.nn.GroupNorm(3, 3)
    y = compare_modules(ours, theirs, inputs((2, 3, 1)))
    np.testing.assert_array_equal(y.detach().numpy(), np.broadcast_to(
        ours.bias.detach().numpy()[:, None], (2, 3, 1)))


@pytest.mark.parametrize("with_bias", [False, True])
def test_functional_group_norm_matches_torch(with_bias):
    arrays = [inputs((2, 4, 3, 2)), inputs((4,), seed=1)] + ([inputs((4,), seed=2)]
                                                             if with_bias else [])
    compare(lambda x, w, *b: F.group_norm(x, 2, w, *b, eps=1e-4),
            lambda x, w, *b: TF.group_norm(x, 2, w, *b, eps=1e-4), arrays)


# -- InstanceNorm -------------------------------------------------------------

INSTANCE_NORMS = [
    ("InstanceNorm1d", dict(num_features=3), (2, 3, 7)),
    ("InstanceNorm1d", dict(num_features=3, affine=True, eps=1e-3), (2, 3, 7)),
    ("InstanceNorm1d", dict(num_features=3, track_running_stats=True), (2, 3, 7)),
    ("InstanceNorm1d", dict(num_features=3, affine=True, track_running_stats=True,
                            momentum=0.3), (3, 7)),
    ("InstanceNorm2d", dict(num_features=3), (2, 3, 4, 5)),
    ("InstanceNorm2d", dict(num_features=3, affine=True, bias=False), (3, 4, 5)),
    ("InstanceNorm2d", dict(num_features=3, affine=True, track_running_stats=True),
     (2, 3, 4, 5)),
    ("InstanceNorm2d", dict(num_features=3, track_running_stats=True, momentum=None),
     (2, 3, 4, 5)),
]


def buffers_match(ours, theirs, dtype):
    for (kname, kb), (tname, tb) in zip(ours.named_buffers(), theirs.named_buffers(),
                                        strict=True):
        assert kname == tname
        assert_close(kb.numpy(), tb.numpy(), dtype)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, kwargs, shape", INSTANCE_NORMS)
def test_instance_norm_trains_and_evaluates_as_torch(name, kwargs, shape, dtype):
    """Three training steps (outputs, gradients, running statistics after
    each), then eval, on different inputs each time."""
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    load_torch_weights(ours, theirs)
    if dtype == np.float64:
        ours.double()
        theirs.double()
    params = list(zip(ours.parameters(), theirs.parameters(), strict=True))
    for step in range(3):
        for kp, tp in params:
            kp.grad, tp.grad = None, None
        compare(ours, theirs, [inputs(shape, dtype, seed=step) * (step + 1) + step], dtype,
                params)
        buffers_match(ours, theirs, dtype)
    ours.eval()
    theirs.eval()
    compare(ours, theirs, [inputs(shape, dtype, seed=7) * 2.0], dtype)
    buffers_match(ours, theirs, dtype)


@pytest.mark.parametrize("name, kwargs, shape", INSTANCE_NORMS)
def test_instance_norm_traces_and_hybridizes_with_its_running_stats(name, kwargs, shape):
    """A hybridized module moves its running statistics on every call as
    the eager one does, and evaluates with them."""
    eager = getattr(nn, name)(**kwargs)
    compiled = copy.deepcopy(eager)
    compiled.hybridize()
    for step in range(3):
        x = kiln.tensor(inputs(shape, np.float32, seed=step) + step)
        np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(),
                                   rtol=1e-6, atol=1e-6)
        for kb, eb in zip(compiled.buffers(), eager.buffers(), strict=True):
            np.testing.assert_allclose(kb.numpy(), eb.numpy(), rtol=1e-6, atol=1e-7)
    eager.eval()
    compiled.eval()
    x = kiln.tensor(inputs(shape, np.float32, seed=9))
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    check_traced_and_hybridized(eager, inputs(shape, np.float32, seed=4))


def test_instance_norm_state_dict_keys_are_torchs():
    for kwargs in [{}, {"affine": True}, {"track_running_stats": True},
                   {"affine": True, "track_running_stats": True, "bias": False}]:
        assert (list(nn.InstanceNorm2d(4, **kwargs).state_dict())
                == list(torch.nn.InstanceNorm2d(4, **kwargs).state_dict()))
    assert list(nn.GroupNorm(2, 4, affine=False).state_dict()) == []


def test_functional_instance_norm_with_running_stats_matches_torch():
    running = {lib: (lib.zeros(3, dtype=dt), lib.ones(3, dtype=dt))
               for lib, dt in ((kiln, kiln.float64), (torch, torch.float64))}
    w, b = inputs((3,), seed=1), inputs((3,), seed=2)
    for step in range(3):
        compare(lambda x, w, b: F.instance_norm(x, *running[kiln], w, b, momentum=0.2),
                lambda x, w, b: TF.instance_norm(x, *running[torch], w, b, momentum=0.2),
                [inputs((2, 3, 4, 3), seed=step) + step, w, b])
        for k, t in zip(running[kiln], running[torch], strict=True):
            assert_close(k.numpy(), t.numpy(), np.float64)
    compare(lambda x: F.instance_norm(x, *running[kiln], use_input_stats=False),
            lambda x: TF.instance_norm(x, *running[torch], use_input_stats=False),
            [inputs((2, 3, 5))])


NORM_ERRORS = [
    (lambda: nn.GroupNorm(4, 6), ValueError, r"num_channels \(6\) must be divisible by "
                                             r"num_groups \(4\)"),
    (lambda: F.group_norm(kiln.ones(2, 3, 4), 2), RuntimeError,
     r"number of channels in input to be divisible by num_groups, but got input of shape "
     r"\[2, 3, 4\] and num_groups=2"),
    (lambda: F.group_norm(kiln.ones(3), 1), RuntimeError,
     "expected at least 2 dimensions for input tensor but received 1"),
    (lambda: F.group_norm(kiln.ones(1, 3, 1), 3), ValueError,
     "expected more than 1 value per channel when training"),
    (lambda: F.group_norm(kiln.ones(2, 4, 3), 2, kiln.ones(3)), RuntimeError,
     r"expected weight to be a vector of size equal to the number of channels in input, but "
     r"got weight of shape \[3\]"),
    (lambda: F.instance_norm(kiln.ones(2, 3, 1)), ValueError,
     r"expected more than 1 spatial element when training, got input size \[2, 3, 1\]"),
    (lambda: F.instance_norm(kiln.ones(2, 3, 4), use_input_stats=False), RuntimeError,
     "expected running_mean and running_var to be defined when use_input_stats is false"),
    (lambda: nn.InstanceNorm1d(3)(kiln.ones(2, 3, 4, 5)), ValueError,
     r"expected 2D or 3D input \(got 4D input\)"),
    (lambda: nn.InstanceNorm2d(3)(kiln.ones(3, 4)), ValueError,
     r"expected 3D or 4D input \(got 2D input\)"),
    (lambda: nn.InstanceNorm1d(4, affine=True)(kiln.ones(2, 3, 5)), ValueError,
     r"expected input's size at dim=1 to match num_features \(4\), but got: 3"),
]


@pytest.mark.parametrize("make, error, message", NORM_ERRORS)
def test_normalization_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_instance_norm_warns_when_features_differ_without_affine():
    with pytest.warns(UserWarning, match="input's size at dim=1 does not match num_features"):
        nn.InstanceNorm1d(4)(kiln.ones(2, 3, 5))


# -- losses -------------------------------------------------------------------

def probabilities(shape, seed):
    return np.random.default_rng(seed).uniform(0.05, 0.95, shape)


def loss_case(kloss, tloss, arrays, dtype=np.float64, grad_of=None):
    """kloss(*kiln) vs tloss(*torch); gradients of the arrays in grad_of
    (indices; all by default), the others passed as constant tensors."""
    grad_of = range(len(arrays)) if grad_of is None else grad_of
    ks, ts = [], []
    for i, a in enumerate(arrays):
        a = a.astype(dtype)
        if i in grad_of:
            k, t = pair_of(a)
        else:
            k, t = kiln.tensor(a), torch.tensor(a)
        ks.append(k)
        ts.append(t)
    ky, ty = kloss(*ks), tloss(*ts)
    assert tuple(ky.shape) == tuple(ty.shape)
    assert_close(ky.detach().numpy(), ty.detach().numpy(), dtype)
    seed = seed_like(ty)
    (ky * kiln.tensor(seed, dtype=ky.dtype)).sum().backward()
    (ty * torch.tensor(seed, dtype=ty.dtype)).sum().backward()
    for i in grad_of:
        assert_close(ks[i].grad.numpy(), ts[i].grad.numpy(), dtype)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss_matches_torch(reduction, weighted, dtype):
    weight = inputs((4,), seed=3) ** 2 if weighted else None
    kw = None if weight is None else kiln.tensor(weight.astype(dtype))
    tw = None if weight is None else torch.tensor(weight.astype(dtype))
    arrays = [probabilities((3, 4), 0), probabilities((3, 4), 1)]
    loss_case(nn.BCELoss(weight=kw, reduction=reduction),
              torch.nn.BCELoss(weight=tw, reduction=reduction), arrays, dtype)
    loss_case(lambda x, y: F.binary_cross_entropy(x, y, kw, reduction=reduction),
              lambda x, y: TF.binary_cross_entropy(x, y, tw, reduction=reduction), arrays,
              dtype)


def test_bce_at_certain_probabilities_clamps_the_log_as_torch():
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    y = np.array([0.0, 1.0, 1.0, 0.0, 0.3])
    got = F.binary_cross_entropy(kiln.tensor(x), kiln.tensor(y), reduction="none")
    want = TF.binary_cross_entropy(torch.tensor(x), torch.tensor(y), reduction="none")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_bce_legacy_size_average_and_reduce():
    x, y = probabilities((5,), 0), probabilities((5,), 1)
    for size_average, reduce, reduction in [(False, None, "sum"), (None, False, "none"),
                                            (True, True, "mean")]:
        with pytest.warns(UserWarning, match=f"please use reduction='{reduction}' instead"):
            ours = nn.BCELoss(size_average=size_average, reduce=reduce)
        assert ours.reduction == reduction
        loss_case(ours, torch.nn.BCELoss(size_average=size_average, reduce=reduce), [x, y])


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0, 3.0])
def test_smooth_l1_loss_matches_torch(reduction, beta, dtype):
    arrays = [inputs((4, 5)) * 2, inputs((4, 5), seed=1)]
    ours = nn.SmoothL1Loss(reduction=reduction, beta=beta)
    theirs = torch.nn.SmoothL1Loss(reduction=reduction, beta=beta)
    assert repr(ours) == repr(theirs)
    loss_case(ours, theirs, arrays, dtype)
    loss_case(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=beta),
              lambda x, y: TF.smooth_l1_loss(x, y, reduction=reduction, beta=beta), arrays,
              dtype)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 0.4, 2.5])
def test_huber_loss_matches_torch(reduction, delta, dtype):
    arrays = [inputs((4, 5)) * 2, inputs((4, 5), seed=1)]
    loss_case(nn.HuberLoss(reduction=reduction, delta=delta),
              torch.nn.HuberLoss(reduction=reduction, delta=delta), arrays, dtype)
    loss_case(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=delta),
              lambda x, y: TF.huber_loss(x, y, reduction=reduction, delta=delta), arrays, dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_huber_loss_matches_torch(reduction):
    arrays = [inputs((4, 5)) * 2, inputs((4, 5), seed=1), inputs((4, 5), seed=2) ** 2]
    loss_case(lambda x, y, w: F.huber_loss(x, y, reduction, 0.7, w),
              lambda x, y, w: TF.huber_loss(x, y, reduction, 0.7, w), arrays)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss_matches_torch(reduction, log_target, dtype):
    log_p = np.log(probabilities((3, 4), 0))
    target = probabilities((3, 4), 1)
    target = np.log(target) if log_target else target
    ours = nn.KLDivLoss(reduction=reduction, log_target=log_target)
    theirs = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_case(ours, theirs, [log_p, target], dtype)
    # torch's warning that "mean" is not the KL divergence's mean, from both.
    assert sum("'batchmean' divides only by the batch size" in str(w.message)
               for w in caught) == (2 if reduction == "mean" else 0)
    loss_case(lambda x, y: F.kl_div(x, y, reduction=reduction, log_target=log_target),
              lambda x, y: TF.kl_div(x, y, reduction=reduction, log_target=log_target),
              [log_p, target], dtype)
    if log_target:
        return
    # A zero target contributes 0 and no gradient to the input (the
    # target's own gradient there is undefined: torch gives NaN).
    target[0, 1] = target[2, 3] = 0.0
    loss_case(ours, theirs, [log_p, target], dtype, grad_of=[0])


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.2])
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
def test_cosine_embedding_loss_matches_torch(reduction, margin, shape, dtype):
    target = np.array([1.0, -1.0, -1.0, 1.0, -1.0][:shape[0]] if len(shape) == 2 else -1.0)
    arrays = [inputs(shape), inputs(shape, seed=1), target]
    loss_case(nn.CosineEmbeddingLoss(margin=margin, reduction=reduction),
              torch.nn.CosineEmbeddingLoss(margin=margin, reduction=reduction), arrays, dtype,
              grad_of=[0, 1])
    loss_case(lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin, reduction=reduction),
              lambda a, b, y: TF.cosine_embedding_loss(a, b, y, margin, reduction=reduction),
              arrays, dtype, grad_of=[0, 1])


@pytest.mark.parametrize("name, kwargs", [("BCELoss", {}), ("SmoothL1Loss", {"beta": 0.5}),
                                          ("HuberLoss", {}),
                                          ("KLDivLoss", {"reduction": "batchmean"})])
def test_losses_trace_to_their_eager_value(name, kwargs):
    loss = getattr(nn, name)(**kwargs)
    x = kiln.tensor(probabilities((3, 4), 0).astype(np.float32))
    y = kiln.tensor(probabilities((3, 4), 1).astype(np.float32))
    traced = kiln.jit.trace(loss, (x, y))
    np.testing.assert_array_equal(traced(x, y).numpy(), loss(x, y).numpy())


LOSS_ERRORS = [
    (lambda x: F.binary_cross_entropy(x, kiln.rand(3)), ValueError,
     r"target size \(\[3\]\) must be the same as input size \(\[3, 1\]\)"),
    (lambda x: F.binary_cross_entropy(x, x, reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda x: F.binary_cross_entropy(x, x, weight=kiln.ones(4)), RuntimeError,
     r"weight of shape \[4\] cannot be broadcast to the input's shape \[3, 1\]"),
    (lambda x: F.huber_loss(x, x, weight=kiln.ones(3)), ValueError,
     "weights and input must have the same size"),
    (lambda x: F.smooth_l1_loss(x, x, beta=-1.0), RuntimeError,
     "smooth_l1_loss: does not support negative values for beta"),
    (lambda x: F.smooth_l1_loss(x, x, reduction="x"), ValueError,
     "x is not a valid value for reduction"),
    (lambda x: F.huber_loss(x, x, delta=0.0), RuntimeError,
     "huber_loss: does not support non-positive values for delta"),
    (lambda x: F.kl_div(x, x, reduction="x"), ValueError,
     "x is not a valid value for reduction"),
    (lambda x: F.cosine_embedding_loss(x, kiln.rand(3, 2), kiln.ones(3)), RuntimeError,
     r"input1 and input2 must have the same shape, got \[3, 1\] and \[3, 2\]"),
    (lambda x: F.cosine_embedding_loss(kiln.rand(3, 2, 2), kiln.rand(3, 2, 2), kiln.ones(3)),
     RuntimeError, r"expected 1-D or 2-D inputs, got shape \[3, 2, 2\]"),
    (lambda x: F.cosine_embedding_loss(x, x, kiln.ones(3, 1)), RuntimeError,
     r"expected a 1-D target for inputs of shape \[3, 1\], got shape \[3, 1\]"),
    (lambda x: F.cosine_embedding_loss(x, x, kiln.ones(3), reduction="x"), ValueError,
     "x is not a valid value for reduction"),
]


@pytest.mark.parametrize("make, error, message", LOSS_ERRORS)
def test_loss_errors(make, error, message):
    with pytest.raises(error, match=message):
        make(kiln.rand(3, 1))
