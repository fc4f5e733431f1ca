"""kiln.nn.functional: PyTorch's functional API. Single ops go through their
typed bindings (kiln._C.linear, ...) or kiln._ops (kiln._C.dispatch);
composites (losses, activations like silu) are kiln/nn's C++ functions, bound
(kiln._C.nn)."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from kiln import _C
from kiln import _ops as K
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._missing import module_getattr
from kiln.nn import _functional_3d, _functional_layers, _functional_more
from kiln.nn._functional_3d import *  # noqa: F403  (conv3d, max_pool3d, ...)
from kiln.nn._functional_attention import *  # noqa: F403  (attention, re-exported)
from kiln.nn._functional_layers import *  # noqa: F403  (conv1d, pad, interpolate, ...)
from kiln.nn._functional_more import *  # noqa: F403  (prelu, max_pool1d, embedding_bag, ...)

# An int for both spatial dims, or one per dim: kernel_size=3 or (3, 5).
Pair = int | Sequence[int]

__all__ = ["flatten", "relu", "sigmoid", "tanh", "gelu", "leaky_relu", "elu", "softplus", "silu",
           "mish", "hardtanh", "relu6", "hardsigmoid", "hardswish", "softmax", "log_softmax",
           "linear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "dropout",
           "batch_norm", "layer_norm", "embedding", "one_hot", "nll_loss", "cross_entropy",
           "mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy",
           "smooth_l1_loss", "huber_loss", "kl_div", "cosine_embedding_loss",
           "cosine_similarity", "normalize", *_functional_layers.__all__, *_functional_3d.__all__,
           *_functional_more.__all__]


def _first(out: Tensor | tuple[Tensor, ...]) -> Tensor:
    """The op's main output, for ops that also return saved statistics."""
    return out[0] if isinstance(out, tuple) else out


# flatten(input, start_dim=0, end_dim=-1) and linear(input, weight, bias=None)
# are the bindings themselves: nothing to adapt, so no Python frame.
flatten = _C.flatten
linear = _C.linear


def _pair(v: Pair) -> Sequence[int]:
    """An int or a sequence of two, as the binding's int list."""
    return (v, v) if isinstance(v, int) else v


def _inplace(input: Tensor, op: Callable[[Tensor], Tensor], inplace: bool) -> Tensor:
    """op(input), or with inplace=True, as in PyTorch, op's result written
    into `input`, which is returned. Where autograd records, op runs on a
    copy, so the values its backward saves are not the ones overwritten
    (PyTorch's in-place kernels save their output instead; kiln keeps one
    kernel per op)."""
    if not inplace:
        return op(input)
    source = input.clone() if input.requires_grad and _C.is_grad_enabled() else input
    input.copy_(op(source))
    return input


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.relu, inplace)


def sigmoid(input: Tensor) -> Tensor:
    return _C.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return _C.tanh(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return _C.gelu(input, approximate)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: _C.leaky_relu(t, negative_slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: K.elu(t, alpha), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return K.softplus(input, beta, threshold)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.silu, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.mish, inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    return _inplace(input, lambda t: _C.nn.hardtanh(t, min_val, max_val), inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.relu6, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.hardsigmoid, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, _C.nn.hardswish, inplace)


def softmax(input: Tensor, dim: int | None = None, dtype: DType | None = None) -> Tensor:
    input = input if dtype is None else input.to(dtype)
    if dim is None:  # the op's own error: dim is required
        return K.softmax(input, dim)
    return _C.softmax(input, dim)


def log_softmax(input: Tensor, dim: int | None = None, dtype: DType | None = None) -> Tensor:
    input = input if dtype is None else input.to(dtype)
    if dim is None:
        return K.log_softmax(input, dim)
    return _C.log_softmax(input, dim)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Pair = 1,
           padding: Pair | str = 0, dilation: Pair = 1, groups: int = 1) -> Tensor:
    if isinstance(padding, str):  # "same" or "valid"
        return _C.nn.conv2d(input, weight, bias, _pair(stride), padding, _pair(dilation), groups)
    return _C.conv2d(input, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups)


def max_pool2d(input: Tensor, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0,
               dilation: Pair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    if return_indices:  # (values, ih * W + iw within each plane)
        return _C.dispatch("max_pool2d_with_indices", [input],
                           {"kernel_size": list(_pair(kernel_size)),
                            "stride": [] if stride is None else list(_pair(stride)),
                            "padding": list(_pair(padding)), "dilation": list(_pair(dilation)),
                            "ceil_mode": ceil_mode})
    # stride=None (PyTorch's default) is the kernel size: an empty list to the op.
    return _C.max_pool2d(input, _pair(kernel_size), () if stride is None else _pair(stride),
                         _pair(padding), _pair(dilation), ceil_mode)


def avg_pool2d(input: Tensor, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return _C.avg_pool2d(input, _pair(kernel_size), () if stride is None else _pair(stride),
                         _pair(padding), ceil_mode, count_include_pad)


def adaptive_avg_pool2d(input: Tensor, output_size: Pair) -> Tensor:
    return _C.adaptive_avg_pool2d(input, _pair(output_size))


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    return _first(K.dropout(input, p=float(p), train=True))


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    out = K.batch_norm(input, weight, bias, running_mean, running_var, training=training,
                       momentum=float(momentum), eps=float(eps))
    return _first(out)


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int],
               weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _first(K.layer_norm(input, weight, bias, normalized_shape=shape, eps=float(eps)))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of `weight` at `input`; with max_norm, the rows it reads are
    first renormalized in place to at most that norm (as torch does)."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("F.embedding: scale_grad_by_freq and sparse gradients are "
                                  "not supported by kiln")
    if max_norm is not None:
        _C.nn.embedding_renorm_(weight, input, float(max_norm), float(norm_type))
    return K.embedding(weight, input, padding_idx=padding_idx)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    return K.one_hot(tensor, num_classes)


# -- losses -------------------------------------------------------------------
# Each is kiln/nn's C++ function (kiln._C.nn), bound once: the C++ API, the
# loss modules and this module share one definition and one set of checks.

def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities [N, C, ...] (or [C]) at
    int64 class indices; "mean" divides by the summed weights of the
    targets not ignored."""
    return _C.nn.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy over class indices (int64 target, with ignore_index) or
    class probabilities (a floating target of the input's shape)."""
    return _C.nn.cross_entropy(input, target, weight, ignore_index, reduction,
                               float(label_smoothing))


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    return _C.nn.mse_loss(input, target, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    return _C.nn.l1_loss(input, target, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid and binary cross-entropy in one numerically stable form."""
    return _C.nn.binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)


def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's deprecated size_average/reduce arguments, as it maps them."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  f"reduction='{reduction}' instead.", stacklevel=3)
    return reduction


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities (each log clamped to >= -100)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _C.nn.binary_cross_entropy(input, target, weight, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _C.nn.smooth_l1_loss(input, target, reduction, float(beta))


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    return _C.nn.huber_loss(input, target, reduction, float(delta), weight)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """KL(target || exp(input)) pointwise; reduction "batchmean" is the
    mathematically right mean (sum / batch size)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    return _C.nn.kl_div(input, target, reduction, log_target)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _C.nn.cosine_embedding_loss(input1, input2, target, float(margin), reduction)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    return _C.nn.cosine_similarity(x1, x2, dim, float(eps))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    if out is not None:
        raise TypeError("normalize(): out= is not supported by kiln")
    return _C.nn.normalize(input, float(p), dim, float(eps))


__getattr__ = module_getattr("kiln.nn.functional", "torch.nn.functional")
