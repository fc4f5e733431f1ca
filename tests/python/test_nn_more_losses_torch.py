"""The margin, ranking and likelihood losses (MultiLabelSoftMarginLoss,
MarginRankingLoss, TripletMarginLoss, GaussianNLLLoss, PoissonNLLLoss,
SoftMarginLoss, HingeEmbeddingLoss, MultiMarginLoss) and PairwiseDistance /
CosineSimilarity against torch's (issue 23): outputs and gradients in
float64 and float32 over every reduction and several argument sets, reprs,
buffers, errors with torch's exception types, and that the loss modules
trace and hybridize to their eager result."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F
from nn_torch_helpers import assert_close, compare, inputs, pair_of, seed_like

TF = torch.nn.functional
BOTH = [np.float64, np.float32]
REDUCTIONS = ["none", "mean", "sum"]


def signs(shape, seed):
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)


def loss_case(ours, theirs, arrays, dtype=np.float64, grad_of=None, int_arrays=()):
    """ours(*kiln) vs theirs(*torch): the loss, then the gradients of the
    arrays in grad_of (all by default; the rest are constants). int_arrays
    are appended as int64 tensors (class indices)."""
    grad_of = range(len(arrays)) if grad_of is None else grad_of
    ks, ts = [], []
    for i, a in enumerate(arrays):
        a = np.asarray(a).astype(dtype)
        k, t = pair_of(a) if i in grad_of else (kiln.tensor(a), torch.tensor(a))
        ks.append(k)
        ts.append(t)
    ks += [kiln.tensor(np.asarray(a)) for a in int_arrays]
    ts += [torch.tensor(np.asarray(a)) for a in int_arrays]
    ky, ty = ours(*ks), theirs(*ts)
    assert tuple(ky.shape) == tuple(ty.shape)
    assert_close(ky.detach().numpy(), ty.detach().numpy(), dtype)
    seed = seed_like(ty)
    (ky * kiln.tensor(seed, dtype=ky.dtype)).sum().backward()
    (ty * torch.tensor(seed, dtype=ty.dtype)).sum().backward()
    for i in grad_of:
        assert_close(ks[i].grad.numpy(), ts[i].grad.numpy(), dtype)
    return ky


def module_pair(name, *args, **kwargs):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def check_hybridized(loss, *arrays):
    """The loss module, traced and hybridized, gives its eager result."""
    tensors = [kiln.tensor(np.asarray(a)) for a in arrays]
    eager = loss(*tensors).detach().numpy()
    np.testing.assert_array_equal(kiln.jit.trace(loss, tuple(tensors))(*tensors).detach().numpy(),
                                  eager)
    loss.hybridize()
    try:
        for _ in range(2):
            np.testing.assert_array_equal(loss(*tensors).detach().numpy(), eager)
    finally:
        loss.hybridize(False)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(4, 5), (5,)])
def test_multilabel_soft_margin_loss_matches_torch(shape, weighted, reduction, dtype):
    weight = np.abs(inputs(shape[-1:], seed=4)) if weighted else None
    kw = None if weight is None else kiln.tensor(weight.astype(dtype))
    tw = None if weight is None else torch.tensor(weight.astype(dtype))
    ours, theirs = (nn.MultiLabelSoftMarginLoss(kw, reduction=reduction),
                    torch.nn.MultiLabelSoftMarginLoss(tw, reduction=reduction))
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # weight: a buffer
    arrays = [inputs(shape) * 4, (signs(shape, 1) + 1) / 2]
    loss_case(ours, theirs, arrays, dtype, grad_of=[0])
    check_hybridized(ours, *[a.astype(dtype) for a in arrays])
    loss_case(lambda x, y: F.multilabel_soft_margin_loss(x, y, kw, reduction=reduction),
              lambda x, y: TF.multilabel_soft_margin_loss(x, y, tw, reduction=reduction),
              [inputs(shape) * 30, (signs(shape, 2) + 1) / 2], dtype)  # far tails too


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.4])
def test_margin_ranking_loss_matches_torch(margin, reduction, dtype):
    ours, theirs = module_pair("MarginRankingLoss", margin, reduction=reduction)
    arrays = [inputs((7,)), inputs((7,), seed=1), signs((7,), 2)]
    loss_case(ours, theirs, arrays, dtype)
    loss_case(lambda a, b, y: F.margin_ranking_loss(a, b, y, margin, reduction=reduction),
              lambda a, b, y: TF.margin_ranking_loss(a, b, y, margin, reduction=reduction),
              arrays, dtype)
    check_hybridized(ours, *[a.astype(np.float32) for a in arrays])


TRIPLETS = [({}, (5, 4)), ({"margin": 0.5, "p": 1.0}, (5, 4)), ({"swap": True}, (5, 4)),
            ({"p": 3.0, "eps": 1e-3, "swap": True}, (6, 3)), ({}, (4,))]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("kwargs, shape", TRIPLETS)
def test_triplet_margin_loss_matches_torch(kwargs, shape, reduction, dtype):
    ours, theirs = module_pair("TripletMarginLoss", reduction=reduction, **kwargs)
    arrays = [inputs(shape), inputs(shape, seed=1) * 0.5, inputs(shape, seed=2)]
    loss_case(ours, theirs, arrays, dtype)
    loss_case(lambda a, p, n: F.triplet_margin_loss(a, p, n, reduction=reduction, **kwargs),
              lambda a, p, n: TF.triplet_margin_loss(a, p, n, reduction=reduction, **kwargs),
              arrays, dtype)
    check_hybridized(ours, *[a.astype(np.float32) for a in arrays])


VARIANCES = [((4, 5), (4, 5)), ((4, 5), (4, 1)), ((4, 5), (4,)), ((3, 2, 4), (3, 1, 4)),
             ((4,), (4,))]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape, var_shape", VARIANCES)
def test_gaussian_nll_loss_matches_torch(shape, var_shape, full, reduction, dtype):
    ours, theirs = module_pair("GaussianNLLLoss", full=full, reduction=reduction)
    var = np.abs(inputs(var_shape, seed=2)) + 0.1
    var.flat[0] = 1e-8  # below eps: clamped in value, its gradient passed straight through
    arrays = [inputs(shape), inputs(shape, seed=1), var]
    loss_case(ours, theirs, arrays, dtype)
    check_hybridized(ours, *[a.astype(np.float32) for a in arrays])


def test_gaussian_nll_loss_takes_a_number_for_var_as_torch():
    arrays = [inputs((3, 4)), inputs((3, 4), seed=1)]
    loss_case(lambda x, y: F.gaussian_nll_loss(x, y, 0.7, eps=1e-3),
              lambda x, y: TF.gaussian_nll_loss(x, y, 0.7, eps=1e-3), arrays)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input, full", [(True, False), (False, False), (True, True),
                                             (False, True)])
def test_poisson_nll_loss_matches_torch(log_input, full, reduction, dtype):
    ours, theirs = module_pair("PoissonNLLLoss", log_input, full, reduction=reduction)
    rates = inputs((4, 5)) if log_input else np.abs(inputs((4, 5))) + 0.05
    counts = np.floor(np.abs(inputs((4, 5), seed=1)) * 4)  # 0, 1 and above: Stirling's mask
    loss_case(ours, theirs, [rates, counts], dtype, grad_of=[0])
    loss_case(lambda x, y: F.poisson_nll_loss(x, y, log_input, full, eps=1e-4,
                                              reduction=reduction),
              lambda x, y: TF.poisson_nll_loss(x, y, log_input, full, eps=1e-4,
                                               reduction=reduction),
              [rates, counts], dtype, grad_of=[0])
    check_hybridized(ours, rates.astype(np.float32), counts.astype(np.float32))


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_loss_matches_torch(reduction, dtype):
    ours, theirs = module_pair("SoftMarginLoss", reduction=reduction)
    arrays = [inputs((4, 5)) * 3, signs((4, 5), 1)]
    loss_case(ours, theirs, arrays, dtype, grad_of=[0])
    loss_case(lambda x, y: F.soft_margin_loss(x, y, reduction=reduction),
              lambda x, y: TF.soft_margin_loss(x, y, reduction=reduction),
              [inputs((6,)) * 40, signs((6,), 2)], dtype, grad_of=[0])  # far tails too
    check_hybridized(ours, *[a.astype(np.float32) for a in arrays])


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [1.0, 0.3, -0.5])
def test_hinge_embedding_loss_matches_torch(margin, reduction, dtype):
    ours, theirs = module_pair("HingeEmbeddingLoss", margin, reduction=reduction)
    arrays = [inputs((4, 5)), signs((4, 5), 1)]
    loss_case(ours, theirs, arrays, dtype, grad_of=[0])
    loss_case(lambda x, y: F.hinge_embedding_loss(x, y, margin, reduction=reduction),
              lambda x, y: TF.hinge_embedding_loss(x, y, margin, reduction=reduction), arrays,
              dtype, grad_of=[0])
    check_hybridized(ours, *[a.astype(np.float32) for a in arrays])


MULTI_MARGINS = [({}, (4, 5), [0, 3, 2, 4]), ({"p": 2, "margin": 0.4}, (4, 5), [1, 1, 0, 4]),
                 ({"margin": 2.0}, (5,), [3]), ({"p": 2}, (5,), 2)]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("kwargs, shape, target", MULTI_MARGINS)
def test_multi_margin_loss_matches_torch(kwargs, shape, target, weighted, reduction, dtype):
    weight = np.abs(inputs(shape[-1:], seed=3)) + 0.2 if weighted else None
    kw = None if weight is None else kiln.tensor(weight.astype(dtype))
    tw = None if weight is None else torch.tensor(weight.astype(dtype))
    ours = nn.MultiMarginLoss(weight=kw, reduction=reduction, **kwargs)
    theirs = torch.nn.MultiMarginLoss(weight=tw, reduction=reduction, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = inputs(shape) * 0.8
    loss_case(ours, theirs, [x], dtype, int_arrays=[np.array(target)])
    loss_case(lambda s, t: F.multi_margin_loss(s, t, weight=kw, reduction=reduction, **kwargs),
              lambda s, t: TF.multi_margin_loss(s, t, weight=tw, reduction=reduction, **kwargs),
              [x], dtype, int_arrays=[np.array(target)])
    if dtype == np.float32:
        check_hybridized(ours, x.astype(np.float32), np.array(target))


@pytest.mark.parametrize("name", ["SoftMarginLoss", "MarginRankingLoss", "PoissonNLLLoss",
                                  "HingeEmbeddingLoss", "MultiLabelSoftMarginLoss"])
def test_legacy_size_average_and_reduce_map_as_torchs(name):
    for module in (nn, torch.nn):
        with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
            assert getattr(module, name)(size_average=False).reduction == "sum"


# -- distances ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("kwargs", [{}, {"p": 1.0, "keepdim": True}, {"p": 3.0, "eps": 0.0},
                                    {"p": float("inf")}, {"p": 0.5}])
def test_pairwise_distance_matches_torch(kwargs, dtype):
    ours, theirs = nn.PairwiseDistance(**kwargs), torch.nn.PairwiseDistance(**kwargs)
    assert repr(ours) == repr(theirs)
    arrays = [inputs((4, 5)), inputs((4, 5), seed=1)]
    loss_case(ours, theirs, arrays, dtype)
    check_hybridized(ours, *[a.astype(dtype) for a in arrays])
    loss_case(lambda a, b: F.pairwise_distance(a, b, **kwargs),
              lambda a, b: TF.pairwise_distance(a, b, **kwargs),
              [inputs((3, 4, 5)), inputs((4, 5), seed=2)], dtype)  # broadcast


def test_pairwise_distance_of_equal_vectors_has_torchs_gradient():
    """|x - x + 0|: a zero norm, whose gradient is 0, not NaN."""
    x = inputs((3, 4))
    compare(lambda a, b: F.pairwise_distance(a, b, eps=0.0),
            lambda a, b: TF.pairwise_distance(a, b, eps=0.0), [x, x.copy()])


def test_cosine_similarity_module_matches_torch():
    ours, theirs = nn.CosineSimilarity(dim=0, eps=1e-6), torch.nn.CosineSimilarity(dim=0,
                                                                                    eps=1e-6)
    assert repr(ours) == repr(theirs)
    loss_case(ours, theirs, [inputs((4, 5)), inputs((4, 5), seed=1)])


@pytest.mark.parametrize("scale", [0.0, 1e-9])
def test_cosine_similarity_of_a_short_vector_has_torchs_gradient(scale):
    """torch clamps the norms to eps in value only: a norm under eps still
    passes its gradient (0 for a zero vector), so no NaN and no cut-off."""
    x, y = inputs((3, 4)), inputs((3, 4), seed=1)
    x[1] *= scale
    compare(lambda a, b: F.cosine_similarity(a, b), lambda a, b: TF.cosine_similarity(a, b),
            [x, y])


# -- errors ---------------------------------------------------------------------

LOSS_ERRORS = [
    (lambda m, f: f.margin_ranking_loss(m.ones(3), m.ones(3, 1), m.ones(3)), RuntimeError,
     "All input tensors should have same dimension"),
    (lambda m, f: f.triplet_margin_loss(m.ones(2, 3), m.ones(2, 3), m.ones(3)), RuntimeError,
     "expected to have the same number of dimensions"),
    (lambda m, f: f.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), m.ones(3, 3)), ValueError,
     "var is of incorrect size"),
    (lambda m, f: f.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), -m.ones(2, 3)), ValueError,
     "var has negative entry/entries"),
    (lambda m, f: f.gaussian_nll_loss(m.ones(2, 3), m.ones(2, 3), -1.0), ValueError,
     "var has negative entry/entries"),
    (lambda m, f: f.gaussian_nll_loss(m.ones(2), m.ones(2), m.ones(2), reduction="x"),
     ValueError, "x is not valid"),
    (lambda m, f: f.soft_margin_loss(m.ones(2), m.ones(2), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda m, f: f.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1]), p=3), ValueError,
     "only p == 1 and p == 2 supported"),
    (lambda m, f: f.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1, 2])), RuntimeError,
     r"Expected target size \[2\], but got \[3\]"),
    (lambda m, f: f.multi_margin_loss(m.ones(2, 3), m.tensor([0, 1]), weight=m.ones(2)),
     RuntimeError, "inconsistent weight size"),
    (lambda m, f: m.nn.MultiMarginLoss(weight=m.ones(2, 2)), ValueError,
     "expected weight to be None or 1D tensor"),
    (lambda m, f: m.nn.TripletMarginLoss(margin=0.0), ValueError,
     "expected margin to be greater than 0"),
]


@pytest.mark.parametrize("call, error, message", LOSS_ERRORS)
def test_loss_errors_are_torchs(call, error, message):
    for lib, functional in ((torch, TF), (kiln, F)):
        with pytest.raises(error, match=message):
            call(lib, functional)
