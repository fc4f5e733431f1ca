"""kiln.nn.utils, as torch.nn.utils: clipping gradients (by their total
norm or by value) and flattening parameters into one vector and back;
kiln.nn.utils.rnn holds padded and packed sequences.

The math is kiln's C++ (kiln/nn/grad_utils.h); these functions turn
PyTorch's arguments (a tensor or an iterable of them, a norm type given as
'inf') into its list. clip_grad_norm_ reads nothing back on the host unless
error_if_nonfinite=True, so it runs inside a kiln.compile'd training step:

    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
"""
from __future__ import annotations

import types
import warnings
from collections.abc import Iterable
from typing import TypeAlias

from kiln import _C
from kiln._C import Tensor
from kiln.nn.utils import rnn

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "rnn"]

TensorOrTensors: TypeAlias = Tensor | Iterable[Tensor]


def _tensor_list(tensors: TensorOrTensors, warn_if_empty_generator: bool = False) -> list[Tensor]:
    if isinstance(tensors, Tensor):
        return [tensors]
    is_generator = isinstance(tensors, types.GeneratorType)
    listed: list[Tensor] = list(tensors)
    if warn_if_empty_generator and is_generator and not listed:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=3)
    return listed


def get_total_norm(tensors: TensorOrTensors, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The norm of the tensors' norms: the norm_type-norm of all their
    elements taken as one vector (a 0-d tensor; 0.0 for no tensors).
    norm_type may be inf ('inf'), 0 (the count of nonzeros) or any p.
    error_if_nonfinite: RuntimeError when the norm is nan or ±inf. foreach
    is accepted for PyTorch's signature; kiln has one implementation."""
    return _C.nn.get_total_norm(_tensor_list(tensors), float(norm_type), error_if_nonfinite)


def clip_grads_with_norm_(parameters: TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scales each parameter's .grad in place by
    min(max_norm / (total_norm + 1e-6), 1); parameters without a gradient
    are skipped."""
    _C.nn.clip_grads_with_norm_(_tensor_list(parameters), float(max_norm), total_norm)


def clip_grad_norm_(parameters: TensorOrTensors, max_norm: float, norm_type: float | str = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Clips the gradients of `parameters` in place so that their total
    norm (get_total_norm of the .grad tensors) is at most max_norm; returns
    the total norm before clipping, a 0-d tensor. The scale is applied
    without branching on it, so nothing is read back on the host and the
    call can sit inside a compiled training step (error_if_nonfinite=True
    does read the norm, to raise)."""
    params = _tensor_list(parameters, warn_if_empty_generator=True)
    return _C.nn.clip_grad_norm_(params, float(max_norm), float(norm_type), error_if_nonfinite)


def clip_grad_norm(parameters: TensorOrTensors, max_norm: float, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated, as in PyTorch: use clip_grad_norm_."""
    warnings.warn("`kiln.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`kiln.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamps every parameter's .grad in place to [-clip_value, clip_value]."""
    _C.nn.clip_grad_value_(_tensor_list(parameters), float(clip_value))


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-D tensor
    (differentiable, like the ops it is made of)."""
    return _C.nn.parameters_to_vector(_tensor_list(parameters))


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copies consecutive slices of the 1-D `vec` into the parameters, in
    order, without recording autograd history. (PyTorch rebinds each
    parameter's .data to a view of vec; kiln copies, so the parameters
    keep their own storage.)"""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected kiln.Tensor, but got: {type(vec).__name__}")
    _C.nn.vector_to_parameters(vec, _tensor_list(parameters))
