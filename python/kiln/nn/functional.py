"""kiln.nn.functional: PyTorch's functional API, each function composed from
kiln ops: the ones a forward pass runs through their typed bindings
(kiln._C.linear, ...), the rest through kiln._ops (kiln._C.dispatch)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln import _C
from kiln import _ops as K
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._factories import ones

# An int for both spatial dims, or one per dim: kernel_size=3 or (3, 5).
Pair = int | Sequence[int]

__all__ = ["flatten", "relu", "sigmoid", "tanh", "gelu", "leaky_relu", "softmax", "log_softmax",
           "linear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "dropout",
           "batch_norm", "layer_norm", "embedding", "one_hot", "nll_loss", "cross_entropy",
           "mse_loss", "l1_loss", "binary_cross_entropy_with_logits"]


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


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _C.relu(input)


def sigmoid(input: Tensor) -> Tensor:
    return _C.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return _C.tanh(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return _C.gelu(input, approximate)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _C.leaky_relu(input, negative_slope)


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
           padding: Pair = 0, dilation: Pair = 1, groups: int = 1) -> Tensor:
    return _C.conv2d(input, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups)


def max_pool2d(input: Tensor, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0,
               dilation: Pair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices is not supported yet")
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


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    return K.embedding(weight, input, padding_idx=padding_idx)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    return K.one_hot(tensor, num_classes)


# -- losses -------------------------------------------------------------------

def _check_reduction(reduction: str, fn: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: {reduction} is not a valid value for reduction "
                         "(use mean, sum or none)")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "sum":
        return K.sum(loss)
    if reduction == "mean":
        return K.mean(loss)
    return loss


def _class_weight_view(weight: Tensor, input: Tensor) -> Tensor:
    shape = [1] * input.ndim
    shape[1] = weight.numel()
    return K.reshape(weight, shape)


def _target_weights(weight: Tensor | None, safe_target: Tensor, ignored: Tensor,
                    dtype: DType) -> Tensor:
    if weight is not None:
        w = K.reshape(K.index_select(weight, flatten(safe_target), 0), list(safe_target.shape))
    else:
        w = ones(safe_target.shape, dtype=dtype)
    return K.where(ignored, 0.0, w)


def _batch_of_one(input: Tensor, target: Tensor, target_dims: int, reduction: str, fn: str,
                  loss: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    if target.ndim != target_dims:
        raise ValueError(f"{fn}: expected a {target_dims}-d target for a 1-d input, "
                         f"got shape {list(target.shape)}")
    out = loss(K.unsqueeze(input, 0), K.unsqueeze(target, 0))
    return K.squeeze(out, 0) if reduction == "none" else out


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    _check_reduction(reduction, "nll_loss")
    if str(target.dtype) != "kiln.int64":
        raise TypeError("nll_loss: expected a target of dtype int64 (class indices), got "
                        f"{target.dtype}")
    if input.ndim == 1:
        return _batch_of_one(input, target, 0, reduction, "nll_loss",
                             lambda x, t: nll_loss(x, t, weight, ignore_index, reduction))
    expected = [input.shape[0], *input.shape[2:]]
    if input.ndim < 2 or list(target.shape) != expected:
        raise ValueError(f"nll_loss: expected a target of shape {expected} for an input of "
                         f"shape {list(input.shape)}, got {list(target.shape)}")
    ignored = K.eq(target, ignore_index)
    safe_target = K.where(ignored, 0, target)
    picked = K.squeeze(K.gather(input, K.unsqueeze(safe_target, 1), 1), 1)
    weights = _target_weights(weight, safe_target, ignored, input.dtype)
    loss = K.where(ignored, 0.0, -picked * weights if weight is not None else -picked)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return K.sum(loss)
    return K.sum(loss) / K.sum(weights)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy over class indices (int64 target, with ignore_index) or
    class probabilities (a floating target of the input's shape)."""
    _check_reduction(reduction, "cross_entropy")
    s = float(label_smoothing)
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {s}")
    probability_target = target.dtype.is_floating_point
    if input.ndim == 1:
        return _batch_of_one(input, target, 1 if probability_target else 0, reduction,
                             "cross_entropy",
                             lambda x, t: cross_entropy(x, t, weight, ignore_index, reduction, s))
    classes = input.shape[1]
    log_probs = _C.log_softmax(input, 1)
    if probability_target:
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError("cross_entropy: a probability target must have the input's shape "
                             f"{list(input.shape)}, got {list(target.shape)}")
        probs = target * (1.0 - s) + s / classes if s > 0 else target
        terms = log_probs * probs
        if weight is not None:
            terms = terms * _class_weight_view(weight, input)
        loss = -K.sum(terms, 1)
        if reduction == "none":
            return loss
        if reduction == "sum":
            return K.sum(loss)
        return K.mean(loss)  # over the numel / C positions; numel() would fix the batch
    nll = nll_loss(log_probs, target, weight, ignore_index, reduction)
    if s == 0.0:
        return nll
    terms = log_probs if weight is None else log_probs * _class_weight_view(weight, input)
    ignored = K.eq(target, ignore_index)
    smooth = K.where(ignored, 0.0, -K.sum(terms, 1))
    if reduction == "sum":
        smooth = K.sum(smooth)
    elif reduction == "mean":
        safe_target = K.where(ignored, 0, target)
        smooth = K.sum(smooth) / K.sum(_target_weights(weight, safe_target, ignored, input.dtype))
    return nll * (1.0 - s) + smooth * (s / classes)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check_reduction(reduction, "mse_loss")
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    _check_reduction(reduction, "l1_loss")
    return _reduce(K.abs(input - target), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    log_sig = -K.softplus(-input) if hasattr(K, "softplus") else K.log(K.sigmoid(input))
    log_one_minus = log_sig - input
    if pos_weight is not None:
        loss = -(pos_weight * target * log_sig + (1 - target) * log_one_minus)
    else:
        loss = -(target * log_sig + (1 - target) * log_one_minus)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
