"""The activations (PReLU, SELU, CELU, GLU, LogSigmoid, Softsign,
Tanhshrink, Hardshrink, Softshrink, Threshold, Softmin, Softmax2d), the
1-d and adaptive-max pools, LP pools, Fold / Unfold, Unflatten and
ChannelShuffle against torch's (issue 23): outputs and gradients in float64
and float32 over several argument sets, reprs, state_dict keys, errors with
torch's exception types, and that each module traces and hybridizes to its
eager result."""
import copy

import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F
from nn_torch_helpers import (
    check_traced_and_hybridized,
    compare,
    compare_modules,
    inputs,
    load_torch_weights,
)

TF = torch.nn.functional
BOTH = [np.float64, np.float32]


class _Funcs:
    """torch or kiln, with its functional's names, so one call serves both."""

    def __init__(self, lib, functional):
        self.lib, self.functional = lib, functional

    def ones(self, *shape):
        return self.lib.ones(*shape)

    def __getattr__(self, name):
        return getattr(self.functional, name)


_TorchF, _KilnF = _Funcs(torch, TF), _Funcs(kiln, F)

# -- activations --------------------------------------------------------------

# (module name, constructor kwargs, input shape)
ACTIVATIONS = [
    ("PReLU", {}, (2, 3, 4)),
    ("PReLU", {"num_parameters": 3, "init": 0.1}, (2, 3, 4)),
    ("PReLU", {"num_parameters": 3}, (2, 3)),
    ("SELU", {}, (3, 5)),
    ("CELU", {}, (3, 5)),
    ("CELU", {"alpha": 1.5}, (2, 3, 4)),
    ("GLU", {}, (3, 6)),
    ("GLU", {"dim": 1}, (2, 4, 3)),
    ("LogSigmoid", {}, (3, 5)),
    ("Softsign", {}, (3, 5)),
    ("Tanhshrink", {}, (3, 5)),
    ("Hardshrink", {}, (4, 5)),
    ("Hardshrink", {"lambd": 1.2}, (4, 5)),
    ("Softshrink", {}, (4, 5)),
    ("Softshrink", {"lambd": 0.1}, (4, 5)),
    ("Threshold", {"threshold": 0.2, "value": -3.0}, (4, 5)),
    ("Softmin", {"dim": 1}, (3, 5)),
    ("Softmin", {"dim": 0}, (3, 5)),
    ("Softmax2d", {}, (2, 3, 4, 2)),
    ("Softmax2d", {}, (3, 4, 2)),
]


def _rtol_for(name, dtype):
    """torch's CELU gradient rounds 1 / alpha to float (derivatives.yaml:
    1.0 / alpha.toFloat()), so in float64 it is float-accurate only."""
    if name == "CELU" and dtype == np.float64:
        return {"rtol": 1e-7, "atol": 1e-8}
    return None


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, kwargs, shape", ACTIVATIONS)
def test_activation_module_matches_torch(name, kwargs, shape, dtype):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    x = inputs(shape, dtype) * 2
    tol = _rtol_for(name, dtype)
    if tol is None:
        compare_modules(ours, theirs, x, dtype)
    else:
        ours.double()
        theirs.double()
        ky, ty = ours(kiln.tensor(x, requires_grad=True)), theirs(torch.tensor(x))
        np.testing.assert_allclose(ky.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
        k, t = kiln.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ours(k).sum().backward()
        theirs(t).sum().backward()
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), **tol)
    check_traced_and_hybridized(ours.float(), inputs(shape, np.float32, seed=3))


def test_prelu_state_dict_and_init_are_torchs():
    for n in (1, 4):
        ours, theirs = nn.PReLU(n, init=0.3), torch.nn.PReLU(n, init=0.3)
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
        np.testing.assert_array_equal(ours.weight.detach().numpy(),
                                      theirs.weight.detach().numpy())
    ours = nn.PReLU(3)
    load_torch_weights(ours, torch.nn.PReLU(3))
    ours.reset_parameters()
    np.testing.assert_array_equal(ours.weight.detach().numpy(), np.full(3, 0.25, np.float32))


FUNCTIONAL_ACTIVATIONS = [
    (lambda x: F.selu(x), lambda x: TF.selu(x)),
    (lambda x: F.celu(x, 2.0), lambda x: TF.celu(x, 2.0)),
    (lambda x: F.glu(x, 0), lambda x: TF.glu(x, 0)),
    (lambda x: F.glu(x), lambda x: TF.glu(x)),
    (lambda x: F.logsigmoid(x * 30), lambda x: TF.logsigmoid(x * 30)),  # far tails too
    (lambda x: F.softsign(x), lambda x: TF.softsign(x)),
    (lambda x: F.softmin(x, -1), lambda x: TF.softmin(x, -1)),
    (lambda x: F.threshold(x, -0.5, 7.0), lambda x: TF.threshold(x, -0.5, 7.0)),
    (lambda x: F.hardshrink(x, 0.3), lambda x: TF.hardshrink(x, 0.3)),
    (lambda x: F.softshrink(x, 0.3), lambda x: TF.softshrink(x, 0.3)),
    (lambda x: F.tanhshrink(x), lambda x: TF.tanhshrink(x)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("ours, theirs", FUNCTIONAL_ACTIVATIONS)
def test_functional_activations_match_torch(ours, theirs, dtype):
    compare(ours, theirs, [inputs((4, 6), dtype) * 2], dtype)


@pytest.mark.parametrize("weight_shape", [(1,), (3,), ()])
def test_functional_prelu_matches_torch(weight_shape):
    compare(F.prelu, TF.prelu, [inputs((2, 3, 4)), inputs(weight_shape, seed=1)])


def test_inplace_activations_write_into_their_input():
    for fn, args in [(F.selu, ()), (F.celu, (0.5,)), (F.threshold, (0.0, 9.0))]:
        x = inputs((3, 4))
        k = kiln.tensor(x)
        out = fn(k, *args, inplace=True)
        assert out is k
        want = getattr(TF, fn.__name__)(torch.tensor(x), *args)
        np.testing.assert_allclose(k.numpy(), want.numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        F.softmin(kiln.ones(2, 3))


ACTIVATION_ERRORS = [
    (lambda: F.glu(kiln.ones(3, 5), 1), RuntimeError, "Halving dimension must be even"),
    (lambda: F.glu(kiln.tensor(1.0)), RuntimeError, "glu does not support scalars"),
    (lambda: F.prelu(kiln.ones(2, 3), kiln.ones(4)), RuntimeError,
     "Mismatch of parameter numbers and input channel size"),
    (lambda: F.prelu(kiln.ones(2, 3), kiln.ones(3, dtype=kiln.float64)), RuntimeError,
     "Type promoting not supported"),
    (lambda: F.softshrink(kiln.ones(2), -1.0), RuntimeError,
     "lambda must be greater or equal to 0"),
    (lambda: nn.Softmax2d()(kiln.ones(2, 3)), ValueError, "expected input to be 3D or 4D"),
    (lambda: F.celu(kiln.ones(2), 0.0), RuntimeError, "ZeroDivisionError"),
]


@pytest.mark.parametrize("make, error, message", ACTIVATION_ERRORS)
def test_activation_errors_are_torchs(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_activation_errors_have_torchs_types():
    """The same mistakes raise the same exception types in torch."""
    for call in [lambda m: m.glu(m.ones(3, 5), 1), lambda m: m.softshrink(m.ones(2), -1.0),
                 lambda m: m.prelu(m.ones(2, 3), m.ones(4))]:
        with pytest.raises(RuntimeError):
            call(_TorchF)
        with pytest.raises(RuntimeError):
            call(_KilnF)



# -- pooling ------------------------------------------------------------------

POOLS_1D = [
    ("MaxPool1d", {"kernel_size": 3}, (2, 3, 10)),
    ("MaxPool1d", {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}, (2, 3, 11)),
    ("MaxPool1d", {"kernel_size": 2, "ceil_mode": True}, (3, 9)),
    ("AvgPool1d", {"kernel_size": 3}, (2, 3, 10)),
    ("AvgPool1d", {"kernel_size": 4, "stride": 2, "padding": 2, "ceil_mode": True,
                   "count_include_pad": False}, (2, 3, 11)),
    ("AvgPool1d", {"kernel_size": 2, "stride": 1}, (3, 7)),
    ("AdaptiveAvgPool1d", {"output_size": 4}, (2, 3, 10)),
    ("AdaptiveAvgPool1d", {"output_size": 7}, (3, 5)),
    ("AdaptiveMaxPool1d", {"output_size": 4}, (2, 3, 10)),
    ("AdaptiveMaxPool1d", {"output_size": 7}, (3, 5)),
    ("AdaptiveMaxPool2d", {"output_size": 3}, (2, 3, 7, 8)),
    ("AdaptiveMaxPool2d", {"output_size": (5, 2)}, (3, 4, 9)),
    ("AdaptiveMaxPool2d", {"output_size": (None, 3)}, (2, 2, 5, 7)),
    ("AdaptiveMaxPool2d", {"output_size": (1, 1)}, (2, 3, 4, 5)),
    ("LPPool1d", {"norm_type": 2, "kernel_size": 3}, (2, 3, 10)),
    ("LPPool1d", {"norm_type": 1.5, "kernel_size": 2, "stride": 3, "ceil_mode": True},
     (2, 3, 10)),
    ("LPPool2d", {"norm_type": 2, "kernel_size": 2}, (2, 3, 6, 6)),
    ("LPPool2d", {"norm_type": 3, "kernel_size": (2, 3), "stride": (1, 2)}, (2, 3, 5, 7)),
    ("LPPool2d", {"norm_type": float("inf"), "kernel_size": 2}, (2, 3, 6, 6)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, kwargs, shape", POOLS_1D)
def test_pool_module_matches_torch(name, kwargs, shape, dtype):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    # LP pools take powers: positive inputs keep fractional ones real.
    x = inputs(shape, dtype)
    x = np.abs(x) + 0.1 if name.startswith("LP") else x
    compare_modules(ours, theirs, x, dtype)
    check_traced_and_hybridized(ours.float(), x.astype(np.float32))


@pytest.mark.parametrize("output_size, shape", [(4, (2, 3, 10)), (3, (3, 3)), (6, (1, 2, 4))])
def test_adaptive_max_pool1d_indices_match_torch(output_size, shape):
    x = inputs(shape)
    ours = F.adaptive_max_pool1d(kiln.tensor(x), output_size, return_indices=True)
    theirs = TF.adaptive_max_pool1d(torch.tensor(x), output_size, return_indices=True)
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    assert ours[1].dtype == kiln.int64


@pytest.mark.parametrize("output_size, shape", [((3, 4), (2, 3, 7, 9)), (2, (3, 5, 5)),
                                                ((5, 7), (1, 2, 3, 4)), ((2, 1), (2, 1, 6, 3))])
def test_adaptive_max_pool2d_indices_match_torch(output_size, shape):
    x = inputs(shape)
    module = nn.AdaptiveMaxPool2d(output_size, return_indices=True)
    ours = module(kiln.tensor(x))
    theirs = torch.nn.AdaptiveMaxPool2d(output_size, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


def test_adaptive_max_pool_ties_go_to_the_first_maximum():
    """Repeated values: torch's index (and gradient) is the first in row order."""
    x = np.array([[[1.0, 3.0, 3.0, 0.0], [3.0, 3.0, 2.0, 3.0]]])
    compare(lambda t: F.adaptive_max_pool2d(t, (1, 2)),
            lambda t: TF.adaptive_max_pool2d(t, (1, 2)), [x])
    ours = F.adaptive_max_pool2d_with_indices(kiln.tensor(x), 1)[1]
    theirs = TF.adaptive_max_pool2d_with_indices(torch.tensor(x), 1)[1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


FUNCTIONAL_POOLS = [
    (lambda x: F.max_pool1d(x, 2), lambda x: TF.max_pool1d(x, 2)),
    (lambda x: F.max_pool1d(x, [3], [1], [1]), lambda x: TF.max_pool1d(x, [3], [1], [1])),
    (lambda x: F.avg_pool1d(x, 3, 2, 1), lambda x: TF.avg_pool1d(x, 3, 2, 1)),
    (lambda x: F.adaptive_avg_pool1d(x, 3), lambda x: TF.adaptive_avg_pool1d(x, 3)),
    (lambda x: F.adaptive_max_pool1d(x, 5), lambda x: TF.adaptive_max_pool1d(x, 5)),
    (lambda x: F.lp_pool1d(x.abs(), 2.5, 3, 2), lambda x: TF.lp_pool1d(x.abs(), 2.5, 3, 2)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("ours, theirs", FUNCTIONAL_POOLS)
def test_functional_pools_match_torch(ours, theirs, dtype):
    compare(ours, theirs, [inputs((2, 3, 11), dtype)], dtype)


POOL_ERRORS = [
    (lambda m: m.max_pool1d(m.ones(2, 3, 4, 5), 2), RuntimeError),
    (lambda m: m.adaptive_max_pool2d(m.ones(5, 6), 2), RuntimeError),
    (lambda m: m.adaptive_max_pool1d(m.ones(2, 0), 2), RuntimeError),
    (lambda m: m.unfold(m.ones(1, 2, 3, 3), 4), RuntimeError),
    (lambda m: m.fold(m.ones(1, 5, 4), (3, 3), 2), RuntimeError),
    (lambda m: m.fold(m.ones(1, 4, 5), (3, 3), 2), RuntimeError),
]


@pytest.mark.parametrize("call, error", POOL_ERRORS)
def test_pool_errors_have_torchs_types(call, error):
    with pytest.raises(error):
        call(_TorchF)
    with pytest.raises(error):
        call(_KilnF)


@pytest.mark.parametrize("shape, args", [((2, 3, 11), (3, 2, 1, 2, True)),
                                         ((3, 9), (2, None, 0, 1, False))])
def test_max_pool1d_returns_indices_as_torch(shape, args):
    x = np.round(np.random.default_rng(3).standard_normal(shape) * 2)  # ties
    kx, tx = kiln.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    kernel, stride, padding, dilation, ceil_mode = args
    values, indices = F.max_pool1d(kx, kernel, stride, padding, dilation, ceil_mode, True)
    want_values, want_indices = TF.max_pool1d(tx, kernel, stride, padding, dilation, ceil_mode,
                                              True)
    np.testing.assert_array_equal(values.detach().numpy(), want_values.detach().numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    values.sum().backward()
    want_values.sum().backward()
    np.testing.assert_array_equal(kx.grad.numpy(), tx.grad.numpy())
    layer_values, layer_indices = nn.MaxPool1d(kernel, stride, padding, dilation, True,
                                               ceil_mode)(kiln.tensor(x))
    np.testing.assert_array_equal(layer_indices.numpy(), want_indices.numpy())


def test_max_pool2d_takes_torchs_argument_order():
    """torch's MaxPool2d(kernel, stride, padding, dilation, return_indices, ceil_mode)."""
    ours, theirs = nn.MaxPool2d(2, 2, 0, 1, False, True), torch.nn.MaxPool2d(2, 2, 0, 1, False,
                                                                              True)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs((1, 2, 5, 5)))


# -- fold / unfold --------------------------------------------------------------

FOLDS = [
    ({"kernel_size": 2}, (2, 3, 4, 5)),
    ({"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}, (2, 3, 7, 9)),
    ({"kernel_size": 3, "padding": (0, 2), "stride": 2}, (3, 6, 5)),
    ({"kernel_size": 1}, (1, 2, 3, 3)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("kwargs, shape", FOLDS)
def test_unfold_and_fold_match_torch(kwargs, shape, dtype):
    ours, theirs = nn.Unfold(**kwargs), torch.nn.Unfold(**kwargs)
    assert repr(ours) == repr(theirs)
    columns = compare_modules(ours, theirs, inputs(shape, dtype), dtype)
    check_traced_and_hybridized(ours, inputs(shape, np.float32))
    # Fold back to the input's size: overlapping blocks add up.
    fold_kwargs = {"output_size": shape[-2:], **kwargs}
    ours, theirs = nn.Fold(**fold_kwargs), torch.nn.Fold(**fold_kwargs)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs(tuple(columns.shape), dtype, seed=2), dtype)
    check_traced_and_hybridized(ours, inputs(tuple(columns.shape), np.float32))


# -- shape ----------------------------------------------------------------------

@pytest.mark.parametrize("dim, sizes, shape", [(1, (2, 3), (4, 6)), (-1, (2, -1), (3, 2, 8)),
                                               (0, [1, 5], (5, 2)), (2, (2, 2, 2), (1, 2, 8))])
def test_unflatten_matches_torch(dim, sizes, shape):
    ours, theirs = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs(shape))
    check_traced_and_hybridized(ours, inputs(shape, np.float32))


def test_unflatten_errors_are_torchs():
    for lib, module in ((torch, torch.nn), (kiln, nn)):
        with pytest.raises(RuntimeError, match="don't multiply up to the size of dim"):
            module.Unflatten(1, (4, 2))(lib.ones(2, 6))
        with pytest.raises(TypeError, match="unflattened_size must be tuple of ints"):
            module.Unflatten(1, (2, 3.0))
        with pytest.raises(RuntimeError):
            module.Unflatten(1, (-1, -1))(lib.ones(2, 6))


@pytest.mark.parametrize("groups, shape", [(2, (2, 6, 3, 2)), (3, (1, 6, 4)), (1, (2, 3, 2, 2))])
def test_channel_shuffle_matches_torch(groups, shape):
    ours, theirs = nn.ChannelShuffle(groups), torch.nn.ChannelShuffle(groups)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, [inputs(shape)])
    compare(lambda x: F.channel_shuffle(x, groups), lambda x: TF.channel_shuffle(x, groups),
            [inputs(shape)])
    check_traced_and_hybridized(ours, inputs(shape, np.float32))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(kiln.ones(1, 5, 2), 2)
    with pytest.raises(RuntimeError, match="divisible by groups"):
        TF.channel_shuffle(torch.ones(1, 5, 2), 2)


# -- hybridized over changing batch sizes -----------------------------------------

BATCH_FREE = [
    (lambda: nn.AdaptiveMaxPool2d((3, 4)), (3, 7, 9)),
    (lambda: nn.AdaptiveMaxPool1d(4), (4, 9)),
    (lambda: nn.MaxPool1d(3), (4, 9)),
    (lambda: nn.AvgPool1d(2), (4, 9)),
    (lambda: nn.Sequential(nn.Unfold(2, padding=1), nn.Fold((7, 9), 2, padding=1)), (3, 7, 9)),
    (lambda: nn.LPPool2d(2, 2), (3, 6, 6)),
    (lambda: nn.RMSNorm(9), (4, 9)),
    (lambda: nn.LocalResponseNorm(3), (4, 3, 3)),
    (lambda: nn.ChannelShuffle(2), (4, 9)),
    (lambda: nn.Unflatten(2, (3, 3)), (4, 9)),
    (lambda: nn.PReLU(4), (4, 9)),
]


@pytest.mark.parametrize("make, sample_shape", BATCH_FREE)
def test_hybridized_modules_follow_the_batch_size(make, sample_shape):
    """A second batch size makes the compiled entry's batch symbolic: the
    results stay the eager ones."""
    module = make()
    batches = {n: kiln.tensor(np.abs(inputs((n, *sample_shape), np.float32, seed=n)))
               for n in (2, 3, 5)}
    eager = {n: module(x).detach().numpy() for n, x in batches.items()}
    module.hybridize()
    try:
        for n in (2, 3, 5, 3):
            np.testing.assert_allclose(module(batches[n]).detach().numpy(), eager[n],
                                       rtol=1e-6, atol=1e-6)
    finally:
        module.hybridize(False)


def test_hybridized_embedding_max_norm_renormalizes_as_eager():
    """The in-place renorm is recorded, so each compiled call repeats it."""
    eager = nn.Embedding(10, 4, max_norm=1.0)
    compiled = copy.deepcopy(eager)
    compiled.hybridize()
    rng = np.random.default_rng(0)
    for n in (2, 3, 3, 4):
        x = kiln.tensor(rng.integers(0, 10, (n, 3)))
        np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(),
                                   rtol=1e-6)
        np.testing.assert_allclose(compiled.weight.detach().numpy(),
                                   eager.weight.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 5, 6))
    grid = rng.uniform(-1.2, 1.2, (2, 4, 7, 2))  # some points outside the input
    got = F.grid_sample(kiln.tensor(x), kiln.tensor(grid), mode, padding_mode, align_corners)
    want = TF.grid_sample(torch.tensor(x), torch.tensor(grid), mode, padding_mode, align_corners)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_grid_sample_says_what_it_lacks():
    x = kiln.rand(1, 1, 3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for 'grid_sample'"):
        F.grid_sample(x, kiln.rand(1, 2, 2, 2), align_corners=False).sum().backward()
    with pytest.raises(NotImplementedError, match="4-D inputs"):
        F.grid_sample(kiln.rand(1, 1, 2, 3, 3), kiln.rand(1, 2, 2, 2, 3))
