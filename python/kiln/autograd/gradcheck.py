"""gradcheck and gradgradcheck, as torch.autograd's: the gradients backward
computes against central finite differences, element by element. Give it
float64 inputs: in float32 the differences drown in rounding."""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kiln import _C
from kiln._C import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck and gradgradcheck when a check fails."""


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _floating_outputs(out: Any) -> list[Tensor]:
    return [o for o in _as_tuple(out) if isinstance(o, _C.Tensor) and o.dtype.is_floating_point]


def _values(t: Tensor) -> np.ndarray:
    return np.asarray(t.detach().numpy(), dtype=np.float64).reshape(-1)


def _with_value(original: Tensor, values: np.ndarray) -> Tensor:
    """A fresh leaf holding `values`, of original's dtype and shape, requiring
    grad as it does (the function may differentiate it, as gradgradcheck's)."""
    dtype = original.detach().numpy().dtype
    fresh = _C.from_numpy(np.ascontiguousarray(values.reshape(original.shape).astype(dtype)))
    return fresh.requires_grad_(original.requires_grad)


def _numerical_jacobians(func: Callable[..., Any], inputs: tuple[Any, ...], which: list[int],
                         eps: float) -> list[list[np.ndarray]]:
    """[input][output]: d output / d input as (input numel, output numel)."""
    def outputs_at(i: int, values: np.ndarray) -> list[np.ndarray]:
        args = list(inputs)
        args[i] = _with_value(inputs[i], values)
        return [_values(o) for o in _floating_outputs(func(*args))]

    jacobians = []
    for i in which:
        base = _values(inputs[i])
        columns: list[list[np.ndarray]] = []
        for j in range(base.size):
            plus, minus = base.copy(), base.copy()
            plus[j] += eps
            minus[j] -= eps
            columns.append([(p - m) / (2 * eps)
                            for p, m in zip(outputs_at(i, plus), outputs_at(i, minus))])
        num_outputs = len(columns[0]) if columns else 0
        jacobians.append([np.stack([c[k] for c in columns]) if columns else np.zeros((0, 0))
                          for k in range(num_outputs)])
    return jacobians


def _analytical_jacobians(outputs: list[Tensor], inputs: list[Tensor]) -> list[list[np.ndarray]]:
    """[input][output], from one backward per output element."""
    from kiln.autograd import grad
    result = [[np.zeros((t.numel(), o.numel())) for o in outputs] for t in inputs]
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue  # depends on no input: zeros
        dtype = out.detach().numpy().dtype
        for e in range(out.numel()):
            seed = np.zeros(out.numel(), dtype=dtype)
            seed[e] = 1
            grads = grad([out], inputs, [_C.from_numpy(seed.reshape(out.shape))],
                         retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    result[i][k][:, e] = _values(g)
    return result


def _fail(message: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func: Callable[..., Any], inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """True when the gradients of func's floating outputs w.r.t. its inputs
    that require grad match central differences (|a - n| <= atol + rtol |n|
    element-wise); otherwise raises GradcheckError (or returns False with
    raise_exception=False). torch's other options are accepted; the check
    is always the full (slow-mode) one."""
    tupled = _as_tuple(inputs)
    which = [i for i, t in enumerate(tupled) if isinstance(t, _C.Tensor) and t.requires_grad]
    if not which:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    for i in which:
        if tupled[i].dtype != _C.dtype.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point. This check will likely fail if all the inputs are not of "
                          "double precision floating point. ", stacklevel=2)
    outputs = _floating_outputs(func(*tupled))
    analytical = _analytical_jacobians(outputs, [tupled[i] for i in which])
    numerical = _numerical_jacobians(func, tupled, which, eps)
    for n, i in enumerate(which):
        for k in range(len(outputs)):
            a, num = analytical[n][k], numerical[n][k]
            if a.shape == num.shape and np.all(np.abs(a - num) <= atol + rtol * np.abs(num)):
                continue
            return _fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                         f"numerical:{num}\nanalytical:{a}\n", raise_exception)
    return True


def gradgradcheck(func: Callable[..., Any], inputs: Any,
                  grad_outputs: Tensor | Sequence[Tensor] | None = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """gradcheck of the first gradients themselves (backward differentiated
    with create_graph=True) w.r.t. the inputs and the output gradients
    (random in [-1, 1) unless given)."""
    from kiln.autograd import grad
    tupled = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            _C.from_numpy(rng.uniform(-1, 1, o.shape).astype(o.detach().numpy().dtype))
            .requires_grad_() for o in _floating_outputs(func(*tupled)) if o.requires_grad)
    tupled_grads = _as_tuple(grad_outputs)
    num_grads = len(tupled_grads)
    differentiable = [i for i, t in enumerate(tupled)
                      if isinstance(t, _C.Tensor) and t.requires_grad]

    def first_gradients(*args: Any) -> tuple[Tensor, ...]:
        input_args, seeds = args[:len(args) - num_grads], args[len(args) - num_grads:]
        outputs = [o for o in _floating_outputs(func(*input_args)) if o.requires_grad]
        grads = grad(outputs, [input_args[i] for i in differentiable], list(seeds),
                     create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_gradients, tupled + tupled_grads, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
