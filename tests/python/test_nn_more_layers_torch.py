"""Channel and alpha dropout, RMSNorm, LocalResponseNorm, F.normalize,
EmbeddingBag and Embedding's from_pretrained and max_norm against torch's
(issue 23): outputs and gradients, the dropout masks' statistics and
scaling, train/eval, reprs, state_dict keys, errors, and that the modules
trace and hybridize to their eager result (dropout: to fresh masks)."""
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
    seed_like,
)

TF = torch.nn.functional
BOTH = [np.float64, np.float32]

# -- channel dropout ------------------------------------------------------------

# (module, input shape, whether dim 0 is a batch)
CHANNEL_DROPOUTS = [("Dropout1d", (8, 50, 6), True), ("Dropout1d", (50, 6), False),
                    ("Dropout2d", (8, 50, 3, 2), True), ("Dropout3d", (8, 50, 2, 2, 2), True),
                    ("Dropout3d", (50, 2, 2, 3), False)]


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("name, shape, batched", CHANNEL_DROPOUTS)
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(name, shape, batched, p):
    kiln.manual_seed(3)
    module = getattr(nn, name)(p)
    assert repr(module) == repr(getattr(torch.nn, name)(p))
    x = np.abs(inputs(shape, np.float32)) + 0.5  # no zeros of its own
    kx = kiln.tensor(x, requires_grad=True)
    y = module(kx)
    y.sum().backward()
    rest = int(np.prod(shape[2:] if batched else shape[1:]))  # the values of one channel
    out, grad = y.detach().numpy().reshape(-1, rest), kx.grad.numpy().reshape(-1, rest)
    dropped = (out == 0).all(axis=1)
    kept = (out != 0).all(axis=1)
    assert (dropped | kept).all(), "a channel is either dropped whole or kept whole"
    np.testing.assert_allclose(out[kept], x.reshape(-1, rest)[kept] / (1 - p), rtol=1e-6)
    np.testing.assert_allclose(grad[kept], 1 / (1 - p), rtol=1e-6)
    assert (grad[dropped] == 0).all()
    # About p of the channels drop (binomial: 4 standard deviations).
    n = len(dropped)
    assert abs(dropped.mean() - p) < 4 * np.sqrt(p * (1 - p) / n)
    module.eval()
    np.testing.assert_array_equal(module(kiln.tensor(x)).numpy(), x)


def test_channel_dropout_masks_come_from_kilns_generator():
    x = kiln.ones(4, 16, 3)
    kiln.manual_seed(11)
    first = F.dropout1d(x, 0.5).numpy()
    kiln.manual_seed(11)
    np.testing.assert_array_equal(F.dropout1d(x, 0.5).numpy(), first)
    assert not np.array_equal(F.dropout1d(x, 0.5).numpy(), first)


def test_hybridized_channel_dropout_draws_new_masks_per_call():
    module = nn.Dropout2d(0.5)
    module.hybridize()
    x = kiln.ones(4, 32, 2, 2)
    masks = [module(x).numpy() for _ in range(3)]
    for m in masks:
        channels = m.reshape(-1, 4)
        assert ((channels == 0).all(axis=1) | (channels == 2.0).all(axis=1)).all()
    assert not np.array_equal(masks[1], masks[2])
    module.eval()
    np.testing.assert_array_equal(module(x).numpy(), x.numpy())


def test_dropout_probability_edges_and_errors_are_torchs():
    x = inputs((2, 3, 4), np.float32)
    np.testing.assert_array_equal(F.dropout1d(kiln.tensor(x), 0.0).numpy(), x)
    np.testing.assert_array_equal(F.dropout1d(kiln.tensor(x), 1.0).numpy(), np.zeros_like(x))
    np.testing.assert_array_equal(F.alpha_dropout(kiln.tensor(x), 1.0, True).numpy(),
                                  np.zeros_like(x))
    for lib, module, functional in ((torch, torch.nn, TF), (kiln, nn, F)):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            module.Dropout2d(1.5)
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            functional.alpha_dropout(lib.ones(3), -0.1)
        with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
            functional.dropout1d(lib.ones(2, 3, 4, 5))


def test_dropout2d_warns_as_torch_on_3d_and_other_inputs():
    for lib, functional in ((torch, TF), (kiln, F)):
        with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
            functional.dropout2d(lib.ones(2, 3, 4))
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
            functional.dropout2d(lib.ones(2, 3))
        with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d"):
            functional.dropout3d(lib.ones(2, 3, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            functional.dropout2d(lib.ones(2, 3, 4, 5))
            functional.dropout3d(lib.ones(2, 3, 4, 5))


def test_inplace_channel_dropout_writes_into_its_input():
    kiln.manual_seed(0)
    x = kiln.ones(3, 8, 5)
    assert F.dropout1d(x, 0.5, inplace=True) is x
    values = set(np.unique(x.numpy()))
    assert values <= {0.0, 2.0} and len(values) == 2


# -- alpha dropout --------------------------------------------------------------

SELU_SATURATION = 1.7580993408473766


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_keeps_selu_statistics(name, p):
    """torch's affine map: kept x -> a x + a alpha p, dropped -> -a alpha (1 - p),
    so a standard normal input keeps mean 0 and variance 1."""
    kiln.manual_seed(5)
    module = getattr(nn, name)(p)
    assert repr(module) == repr(getattr(torch.nn, name)(p))
    shape = (64, 64, 8)
    x = inputs(shape, np.float64)
    y = module(kiln.tensor(x)).numpy()
    a = 1 / np.sqrt((SELU_SATURATION ** 2 * p + 1) * (1 - p))
    dropped_value = -a * SELU_SATURATION * (1 - p)
    kept_value = a * x + a * SELU_SATURATION * p
    dropped = np.isclose(y, dropped_value, rtol=0, atol=1e-12) & ~np.isclose(y, kept_value)
    np.testing.assert_allclose(y[~dropped], kept_value[~dropped], rtol=1e-12)
    assert abs(dropped.mean() - p) < 0.02
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    if name == "FeatureAlphaDropout":
        per_channel = dropped.reshape(64 * 64, 8)
        assert (per_channel.all(axis=1) | ~per_channel.any(axis=1)).all()
    module.eval()
    np.testing.assert_array_equal(module(kiln.tensor(x)).numpy(), x)
    check_traced_and_hybridized(module, x.astype(np.float32))
    # F.alpha_dropout defaults to training=False, as torch's.
    np.testing.assert_array_equal(F.alpha_dropout(kiln.tensor(x), p).numpy(), x)


def test_alpha_dropout_gradient_is_the_kept_scale():
    kiln.manual_seed(1)
    x = kiln.tensor(inputs((200,)), requires_grad=True)
    y = F.alpha_dropout(x, 0.3, training=True)
    y.sum().backward()
    a = 1 / np.sqrt((SELU_SATURATION ** 2 * 0.3 + 1) * 0.7)
    grads = np.unique(np.round(x.grad.numpy(), 12))
    np.testing.assert_allclose(grads, [0.0, a], rtol=1e-12)


# -- normalization --------------------------------------------------------------

RMS_NORMS = [
    ({"normalized_shape": 5}, (3, 5)),
    ({"normalized_shape": (3, 4)}, (2, 3, 4)),
    ({"normalized_shape": [4], "eps": 1e-3}, (2, 3, 4)),
    ({"normalized_shape": 4, "elementwise_affine": False}, (2, 4)),
    ({"normalized_shape": (2, 3), "eps": 0.5}, (2, 3)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("kwargs, shape", RMS_NORMS)
def test_rms_norm_matches_torch(kwargs, shape, dtype):
    ours, theirs = nn.RMSNorm(**kwargs), torch.nn.RMSNorm(**kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    compare_modules(ours, theirs, inputs(shape, dtype) * 3, dtype)
    check_traced_and_hybridized(ours.float(), inputs(shape, np.float32))


@pytest.mark.parametrize("dtype", BOTH)
def test_functional_rms_norm_matches_torch(dtype):
    compare(lambda x, w: F.rms_norm(x, (4,), w), lambda x, w: TF.rms_norm(x, (4,), w),
            [inputs((3, 2, 4), dtype), inputs((4,), dtype, seed=1)], dtype)
    compare(lambda x: F.rms_norm(x, [2, 4], eps=1e-2),
            lambda x: TF.rms_norm(x, [2, 4], eps=1e-2), [inputs((3, 2, 4), dtype) * 0.01],
            dtype)


def test_rms_norm_default_eps_is_the_dtypes():
    """eps=None is finfo(dtype).eps: it shows on inputs near zero."""
    for dtype in BOTH:
        compare(lambda x: F.rms_norm(x, [3]), lambda x: TF.rms_norm(x, [3]),
                [inputs((2, 3), dtype) * 1e-4], dtype)


def test_rms_norm_errors_are_torchs():
    for lib, functional in ((torch, TF), (kiln, F)):
        with pytest.raises(RuntimeError, match="Given normalized_shape="):
            functional.rms_norm(lib.ones(2, 3), [4])
        with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
            functional.rms_norm(lib.ones(2, 3), [3], lib.ones(2))


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("kwargs, shape", [({"size": 3}, (2, 5, 4)),
                                           ({"size": 2, "alpha": 0.1, "beta": 0.6, "k": 2.0},
                                            (2, 6, 3, 4)),
                                           ({"size": 5, "beta": 1.3}, (1, 4, 2, 2, 3))])
def test_local_response_norm_matches_torch(kwargs, shape, dtype):
    ours, theirs = nn.LocalResponseNorm(**kwargs), torch.nn.LocalResponseNorm(**kwargs)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs(shape, dtype) * 2, dtype)
    check_traced_and_hybridized(ours, inputs(shape, np.float32))
    with pytest.raises(ValueError, match="Expected 3D or higher dimensionality"):
        ours(kiln.ones(2, 3))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, float("inf")])
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_normalize_matches_torch_with_a_zero_row(p, dim):
    x = inputs((3, 4))
    x[1] = 0.0  # its norm is 0: the eps clamp, and a gradient of 0, not NaN
    compare(lambda t: F.normalize(t, p, dim), lambda t: TF.normalize(t, p, dim), [x])
    compare(lambda t: F.normalize(t, p, dim, eps=0.5), lambda t: TF.normalize(t, p, dim, eps=0.5),
            [inputs((3, 4)).astype(np.float32)], np.float32)


# -- embedding bags -------------------------------------------------------------

def bag_case(ours, theirs, input, offsets=None, per_sample_weights=None, dtype=np.float64):
    """The two EmbeddingBags (torch's weight loaded) on the same bags: the
    output and the weight's (and per-sample weights') gradient."""
    load_torch_weights(ours, theirs)
    if dtype == np.float64:
        ours.double()
        theirs.double()
    k_args = [kiln.tensor(input), None if offsets is None else kiln.tensor(offsets)]
    t_args = [torch.tensor(input), None if offsets is None else torch.tensor(offsets)]
    kw = tw = None
    if per_sample_weights is not None:
        kw = kiln.tensor(per_sample_weights.astype(dtype), requires_grad=True)
        tw = torch.tensor(per_sample_weights.astype(dtype), requires_grad=True)
    ky, ty = ours(*k_args, per_sample_weights=kw), theirs(*t_args, per_sample_weights=tw)
    assert_close(ky.detach().numpy(), ty.detach().numpy(), dtype)
    seed = seed_like(ty)
    (ky * kiln.tensor(seed, dtype=ky.dtype)).sum().backward()
    (ty * torch.tensor(seed, dtype=ty.dtype)).sum().backward()
    assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), dtype)
    if kw is not None:
        assert_close(kw.grad.numpy(), tw.grad.numpy(), dtype)


INDICES_1D = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 2])
BAGS = [  # (input, offsets)
    (np.array([[1, 2, 4, 5], [4, 3, 2, 9], [0, 0, 7, 2]]), None),
    (INDICES_1D, np.array([0, 4, 4, 7])),  # an empty bag
    (INDICES_1D, np.array([0, 3, 6, 10])),  # the last bag empty
    (INDICES_1D, np.array([0])),
    (np.zeros(0, np.int64), np.array([0, 0])),  # no entries: every bag empty
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("input, offsets", BAGS)
def test_embedding_bag_matches_torch(input, offsets, padding_idx, mode, dtype):
    ours = nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx)
    theirs = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=padding_idx)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    bag_case(ours, theirs, input, offsets, dtype=dtype)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_include_last_offset_matches_torch(mode):
    kwargs = {"mode": mode, "include_last_offset": True}
    bag_case(nn.EmbeddingBag(10, 4, **kwargs), torch.nn.EmbeddingBag(10, 4, **kwargs),
             INDICES_1D, np.array([0, 2, 2, 7, 10]))


@pytest.mark.parametrize("input, offsets", BAGS[:2])
def test_embedding_bag_per_sample_weights_match_torch(input, offsets):
    weights = np.cos(np.arange(input.size)).reshape(input.shape)
    bag_case(nn.EmbeddingBag(10, 3, mode="sum"), torch.nn.EmbeddingBag(10, 3, mode="sum"),
             input, offsets, weights)


def test_embedding_bag_init_zeroes_the_padding_row_and_hybridizes():
    bag = nn.EmbeddingBag(6, 4, padding_idx=-2)
    assert bag.padding_idx == 4
    weight = bag.weight.detach().numpy()
    assert (weight[4] == 0).all() and (weight[:4] != 0).all()
    check_traced_and_hybridized(bag, np.array([[0, 4, 5], [1, 1, 2]]))

    class WithOffsets(nn.Module):  # hybridized calls take tensors positionally
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(10, 3, mode="max")

        def forward(self, indices, offsets):
            return self.bag(indices, offsets)

    module = WithOffsets()

    def run(offsets):
        return module(kiln.tensor(INDICES_1D), kiln.tensor(np.array(offsets))).detach().numpy()

    eager = {tuple(o): run(o) for o in ([0, 4, 4, 7], [0, 1, 5, 9])}
    module.hybridize()
    try:
        for _ in range(2):  # the recording call, then the compiled plan; new offsets reuse it
            for offsets, want in eager.items():
                np.testing.assert_array_equal(run(list(offsets)), want)
    finally:
        module.hybridize(False)


def test_embedding_bag_from_pretrained_matches_torch():
    weights = inputs((5, 3))
    ours = nn.EmbeddingBag.from_pretrained(kiln.tensor(weights), mode="sum")
    theirs = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(weights), mode="sum")
    assert repr(ours) == repr(theirs)
    assert not ours.weight.requires_grad
    x = np.array([[0, 1], [4, 4]])
    np.testing.assert_allclose(ours(kiln.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())
    assert nn.EmbeddingBag.from_pretrained(kiln.tensor(weights), freeze=False).weight \
        .requires_grad


EMBEDDING_BAG_ERRORS = [
    (lambda m, f: f.embedding_bag(m.tensor([[1, 2]]), m.ones(3, 2), m.tensor([0])), ValueError,
     "if input is 2D, then offsets has to be None"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3, 2)), ValueError,
     "offsets has to be a 1D Tensor but got None"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3, 2), m.tensor([0]), mode="min"),
     ValueError, "mode has to be one of sum, mean or max"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3, 2), m.tensor([0]),
                                  per_sample_weights=m.ones(2)),
     NotImplementedError, "per_sample_weights is only supported for mode='sum'"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3, 2), m.tensor([0]), mode="sum",
                                  per_sample_weights=m.ones(3)),
     ValueError, "must have the same shape as the input"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3), m.tensor([0])), ValueError,
     "weight has to be a 2D Tensor"),
    (lambda m, f: f.embedding_bag(m.tensor([1, 2]), m.ones(3, 2), m.tensor([1])), RuntimeError,
     "offsets\\[0\\] has to be 0"),
]


@pytest.mark.parametrize("call, error, message", EMBEDDING_BAG_ERRORS)
def test_embedding_bag_errors_are_torchs(call, error, message):
    for lib, functional in ((torch, TF), (kiln, F)):
        with pytest.raises(error, match=message):
            call(lib, functional)


# -- Embedding: from_pretrained and max_norm --------------------------------------

def test_embedding_from_pretrained_matches_torch():
    weights = inputs((6, 3))
    for kwargs in [{}, {"freeze": False}, {"padding_idx": 1, "freeze": False}]:
        ours = nn.Embedding.from_pretrained(kiln.tensor(weights), **kwargs)
        theirs = torch.nn.Embedding.from_pretrained(torch.tensor(weights), **kwargs)
        assert repr(ours) == repr(theirs)
        assert ours.weight.requires_grad == theirs.weight.requires_grad
        # The padding row is kept as given (from_pretrained does not zero it).
        np.testing.assert_array_equal(ours.weight.detach().numpy(), weights)
        x = np.array([[1, 2, 1], [5, 0, 1]])
        ky, ty = ours(kiln.tensor(x)), theirs(torch.tensor(x))
        assert_close(ky.detach().numpy(), ty.detach().numpy(), np.float64)
        if not theirs.weight.requires_grad:
            continue
        (ky * kiln.tensor(seed_like(ty))).sum().backward()
        (ty * torch.tensor(seed_like(ty))).sum().backward()
        assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), np.float64)
    with pytest.raises(AssertionError, match="Embeddings parameter is expected to be 2-dim"):
        nn.Embedding.from_pretrained(kiln.ones(3))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_embedding_max_norm_renormalizes_looked_up_rows_as_torch(norm_type):
    kwargs = {"max_norm": 1.0, "norm_type": norm_type, "padding_idx": 0}
    ours, theirs = nn.Embedding(8, 4, **kwargs), torch.nn.Embedding(8, 4, **kwargs)
    assert repr(ours) == repr(theirs)
    load_torch_weights(ours, theirs)
    ours.double()
    theirs.double()
    for x in [np.array([[1, 2, 2], [7, 0, 1]]), np.array([3, 5, 3])]:  # grads accumulate
        ky, ty = ours(kiln.tensor(x)), theirs(torch.tensor(x))
        assert_close(ky.detach().numpy(), ty.detach().numpy(), np.float64)
        # The looked-up rows were rescaled in place; the others are untouched.
        assert_close(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), np.float64)
        (ky * kiln.tensor(seed_like(ty))).sum().backward()
        (ty * torch.tensor(seed_like(ty))).sum().backward()
        assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), np.float64)


def test_embedding_bag_max_norm_matches_torch():
    ours = nn.EmbeddingBag(10, 3, max_norm=0.5, mode="sum")
    theirs = torch.nn.EmbeddingBag(10, 3, max_norm=0.5, mode="sum")
    assert repr(ours) == repr(theirs)
    bag_case(ours, theirs, INDICES_1D, np.array([0, 4, 4, 7]))
    assert_close(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), np.float64)


def test_embedding_arguments_kiln_lacks_say_so():
    with pytest.raises(NotImplementedError, match="sparse=True"):
        nn.Embedding(4, 2, sparse=True)
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq=True"):
        nn.EmbeddingBag(4, 2, scale_grad_by_freq=True)(kiln.tensor([[0, 1]]))
    for lib in (torch, kiln):
        with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
            lib.nn.Embedding(4, 2, padding_idx=4)
        with pytest.raises(AssertionError, match="padding_idx must be within num_embeddings"):
            lib.nn.EmbeddingBag(4, 2, padding_idx=-5)
