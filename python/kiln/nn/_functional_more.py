"""kiln.nn.functional's activations, 1-d and adaptive-max pools, LP pools,
fold / unfold, affine_grid, channel and alpha dropout, rms_norm, local_response_norm,
channel_shuffle, embedding_bag, pairwise_distance and the margin and
likelihood losses, with torch's signatures. Each is kiln/nn's C++ function
(layers_more.h, loss_more.h), bound once (kiln._C.nn); here an int becomes
the list the C++ takes and torch's Python-level warnings are given, nothing
more. The modules of kiln.nn.layers_more call these."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from kiln import _C
from kiln._C import Tensor
from kiln._C import dtype as DType

__all__ = ["prelu", "selu", "celu", "glu", "logsigmoid", "softsign", "tanhshrink", "hardshrink",
           "softshrink", "threshold", "softmin", "max_pool1d", "avg_pool1d",
           "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "lp_pool1d",
           "lp_pool2d", "unfold", "fold", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "rms_norm", "local_response_norm", "channel_shuffle",
           "embedding_bag", "pairwise_distance", "multilabel_soft_margin_loss",
           "margin_ranking_loss", "triplet_margin_loss", "gaussian_nll_loss", "poisson_nll_loss",
           "soft_margin_loss", "hinge_embedding_loss", "multi_margin_loss", "grid_sample",
           "affine_grid"]

IntOrSeq = int | Sequence[int]


def _ints(v: IntOrSeq, n: int = 1) -> list[int]:
    """torch's _single / _pair: an int repeated n times, a sequence as given."""
    return [v] * n if isinstance(v, int) else list(v)


def _stride(stride: IntOrSeq | None, n: int) -> list[int]:
    """None (torch's default: the kernel size) is an empty list to the C++."""
    return [] if stride is None else _ints(stride, n)


def _inplace(input: Tensor, op: Callable[[Tensor], Tensor], inplace: bool) -> Tensor:
    """op(input), or op's result written into input (see functional._inplace)."""
    if not inplace:
        return op(input)
    source = input.clone() if input.requires_grad and _C.is_grad_enabled() else input
    input.copy_(op(source))
    return input


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """torch's deprecated size_average / reduce, as functional maps them."""
    from kiln.nn.functional import _legacy_reduction  # functional imports this module
    return _legacy_reduction(size_average, reduce, reduction)


# -- activations --------------------------------------------------------------

def prelu(input: Tensor, weight: Tensor) -> Tensor:
    return _C.nn.prelu(input, weight)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.selu, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: _C.nn.celu(t, float(alpha)), inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    return _C.nn.glu(input, dim)


def logsigmoid(input: Tensor) -> Tensor:
    return _C.nn.logsigmoid(input)


def softsign(input: Tensor) -> Tensor:
    return _C.nn.softsign(input)


def tanhshrink(input: Tensor) -> Tensor:
    return _C.nn.tanhshrink(input)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return _C.nn.hardshrink(input, float(lambd))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return _C.nn.softshrink(input, float(lambd))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: _C.nn.threshold(t, float(threshold), float(value)), inplace)


def _softmax_dim(ndim: int) -> int:
    """torch's implicit softmax dim (with its warning)."""
    warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: DType | None = None) -> Tensor:
    input = input if dtype is None else input.to(dtype)
    return _C.nn.softmin(input, _softmax_dim(input.ndim) if dim is None else dim)


# -- pooling ------------------------------------------------------------------

def max_pool1d(input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
               padding: IntOrSeq = 0, dilation: IntOrSeq = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    if return_indices:  # a 2-D pool over one row: its per-plane indices are torch's 1-D ones
        stride_2d = [] if stride is None else [1, *_ints(stride)]
        values, indices = _C.dispatch(
            "max_pool2d_with_indices", [input.unsqueeze(-2)],
            {"kernel_size": [1, *_ints(kernel_size)], "stride": stride_2d,
             "padding": [0, *_ints(padding)], "dilation": [1, *_ints(dilation)],
             "ceil_mode": ceil_mode})
        return values.squeeze(-2), indices.squeeze(-2)
    return _C.nn.max_pool1d(input, _ints(kernel_size), _stride(stride, 1), _ints(padding),
                            _ints(dilation), ceil_mode)


def avg_pool1d(input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
               padding: IntOrSeq = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    return _C.nn.avg_pool1d(input, _ints(kernel_size), _stride(stride, 1), _ints(padding),
                            ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input: Tensor, output_size: IntOrSeq) -> Tensor:
    return _C.nn.adaptive_avg_pool1d(input, _ints(output_size))


def _adaptive_sizes(input: Tensor, output_size: int | None | Sequence[int | None],
                    n: int) -> list[int]:
    """torch's output_size: an int for every dim, None keeping the input's."""
    sizes = [output_size] * n if not isinstance(output_size, Sequence) else list(output_size)
    spatial = input.shape[input.ndim - len(sizes):]
    return [int(spatial[i]) if s is None else s for i, s in enumerate(sizes)]


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: IntOrSeq,
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    return _C.nn.adaptive_max_pool1d_with_indices(input, _ints(output_size))


def adaptive_max_pool2d_with_indices(input: Tensor,
                                     output_size: int | None | Sequence[int | None],
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    return _C.nn.adaptive_max_pool2d_with_indices(input, _adaptive_sizes(input, output_size, 2))


def adaptive_max_pool1d(input: Tensor, output_size: IntOrSeq,
                        return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    out = adaptive_max_pool1d_with_indices(input, output_size)
    return out if return_indices else out[0]


def adaptive_max_pool2d(input: Tensor, output_size: int | None | Sequence[int | None],
                        return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    out = adaptive_max_pool2d_with_indices(input, output_size)
    return out if return_indices else out[0]


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: IntOrSeq,
              stride: IntOrSeq | None = None, ceil_mode: bool = False) -> Tensor:
    return _C.nn.lp_pool1d(input, float(norm_type), _ints(kernel_size), _stride(stride, 1),
                           ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntOrSeq,
              stride: IntOrSeq | None = None, ceil_mode: bool = False) -> Tensor:
    return _C.nn.lp_pool2d(input, float(norm_type), _ints(kernel_size, 2), _stride(stride, 2),
                           ceil_mode)


def unfold(input: Tensor, kernel_size: IntOrSeq, dilation: IntOrSeq = 1, padding: IntOrSeq = 0,
           stride: IntOrSeq = 1) -> Tensor:
    """The sliding blocks of [N, C, H, W] (or [C, H, W]) as [N, C kh kw, L]."""
    return _C.nn.unfold(input, _ints(kernel_size, 2), _ints(dilation, 2), _ints(padding, 2),
                        _ints(stride, 2))


def fold(input: Tensor, output_size: IntOrSeq, kernel_size: IntOrSeq, dilation: IntOrSeq = 1,
         padding: IntOrSeq = 0, stride: IntOrSeq = 1) -> Tensor:
    """unfold's adjoint: the blocks summed back into [N, C, H, W]."""
    return _C.nn.fold(input, _ints(output_size, 2), _ints(kernel_size, 2), _ints(dilation, 2),
                      _ints(padding, 2), _ints(stride, 2))


# -- dropout ------------------------------------------------------------------

def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, L] (or [C, L])."""
    return _inplace(input, lambda t: _C.nn.dropout1d(t, float(p), training), inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, H, W]; a 3-d input is taken as
    [N, C, L], with torch's warnings."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain the "
                      "behavior and silence this warning, please use dropout instead. Note that "
                      "dropout2d exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D "
                      "or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, H, "
                      "W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", stacklevel=2)
    return _inplace(input, lambda t: _C.nn.feature_dropout(t, float(p), training), inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zeroes whole channels of [N, C, D, H, W] (or [C, D, H, W])."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain the "
                      "behavior and silence this warning, please use dropout instead. Note that "
                      "dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D "
                      "or 5D inputs).", stacklevel=2)
    return _inplace(input, lambda t: _C.nn.dropout3d(t, float(p), training), inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: keeps zero mean and unit variance."""
    return _inplace(input, lambda t: _C.nn.alpha_dropout(t, float(p), training), inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: _C.nn.feature_alpha_dropout(t, float(p), training), inplace)


# -- normalization, shape, embedding ------------------------------------------

def rms_norm(input: Tensor, normalized_shape: IntOrSeq, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    return _C.nn.rms_norm(input, _ints(normalized_shape), weight,
                          None if eps is None else float(eps))


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    return _C.nn.local_response_norm(input, size, float(alpha), float(beta), float(k))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    return _C.nn.channel_shuffle(input, groups)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of weight's rows: input [B, L], or 1-d
    with offsets (where each bag starts)."""
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq=True is not supported by "
                                  "kiln")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True (sparse gradients) is not "
                                  "supported by kiln")
    if max_norm is not None:
        _C.nn.embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return _C.nn.embedding_bag(input, weight, offsets, mode, per_sample_weights,
                               include_last_offset, padding_idx)


# -- losses -------------------------------------------------------------------

def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    return _C.nn.pairwise_distance(x1, x2, float(p), float(eps), keepdim)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.multilabel_soft_margin_loss(input, target, weight, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.margin_ranking_loss(input1, input2, target, float(margin), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.triplet_margin_loss(anchor, positive, negative, float(margin), float(p),
                                     float(eps), swap, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    var = var if isinstance(var, Tensor) else float(var)
    return _C.nn.gaussian_nll_loss(input, target, var, full, float(eps), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.poisson_nll_loss(input, target, log_input, full, float(eps), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.soft_margin_loss(input, target, reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    return _C.nn.hinge_embedding_loss(input, target, float(margin), reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    return _C.nn.multi_margin_loss(input, target, p, float(margin), weight, reduction)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """torch's F.grid_sample on 4-D inputs (no gradient yet: backward through
    it is an error naming the op)."""
    if input.ndim != 4:
        raise NotImplementedError("grid_sample: kiln samples 4-D inputs (N, C, H, W) only")
    return _C.dispatch("grid_sample", [input, grid],
                       {"mode": mode, "padding_mode": padding_mode,
                        "align_corners": bool(align_corners)})


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """torch's F.affine_grid: the grid_sample grid of the affine maps theta
    ([N, 2, 3] for size (N, C, H, W), [N, 3, 4] for size (N, C, D, H, W));
    differentiable in theta. align_corners=None is False, as in torch."""
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids "
                      "when align_corners=True. This is not an intended use case of affine_grid. "
                      "See the documentation of affine_grid for details.", stacklevel=2)
    return _C.nn.affine_grid(theta, size, bool(align_corners))
