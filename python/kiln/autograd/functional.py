"""kiln.autograd.functional: derivatives of a function of tensors, as
torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp. Each calls
`func` once on copies of the inputs (or, with create_graph=True, on views that
keep the inputs' history) and differentiates with kiln.autograd.grad.

jvp uses the double-vjp trick (a vjp is linear in its vector, so
differentiating it w.r.t. that vector gives the jvp); hvp is the vhp of the
symmetric Hessian. `vectorize` and `strategy` are accepted; the Jacobian is
always built row by row in reverse mode."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln._grad_mode import enable_grad, set_grad_enabled

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(x: Any, what: str, fn: str) -> tuple[bool, tuple[Tensor, ...]]:
    is_tuple = isinstance(x, tuple)
    items = x if is_tuple else (x,)
    for i, item in enumerate(items):
        if not isinstance(item, _C.Tensor):
            if is_tuple:
                raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of "
                                f"Tensors but the value at index {i} has type {type(item)}.")
            raise TypeError(f"The {what} given to {fn} must be either a Tensor or a tuple of "
                            f"Tensors but the given {what} has type {type(item)}.")
    return is_tuple, items


def _untuple(res: Any, to_unpack: bool | tuple[bool, bool]) -> Any:
    if isinstance(to_unpack, bool):
        return res if to_unpack else res[0]
    outer, inner = to_unpack
    if not inner:
        res = tuple(r[0] for r in res)
    return res if outer else res[0]


def _prepare(inputs: tuple[Tensor, ...], create_graph: bool,
             need_graph: bool) -> tuple[Tensor, ...]:
    """Leaves to differentiate: views of the inputs when the result must
    keep their history (create_graph), else detached copies."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(x: Any, create_graph: bool) -> Any:
    if isinstance(x, tuple):
        return tuple(_finish(item, create_graph) for item in x)
    return x if create_graph or x is None else x.detach()


def _check_requires_grad(xs: tuple[Any, ...], what: str, strict: bool) -> None:
    if not strict:
        return
    for i, x in enumerate(xs):
        if x is None or not x.requires_grad:
            raise RuntimeError(f"The {what} of the user-provided function with index {i} does "
                               "not require gradients (or is independent of the inputs), which "
                               "strict mode does not allow.")


def _grad(outputs: tuple[Tensor | None, ...], inputs: tuple[Tensor, ...],
          grad_outputs: tuple[Tensor, ...] | None = None, create_graph: bool = False,
          retain_graph: bool | None = None) -> tuple[Tensor | None, ...]:
    """kiln.autograd.grad over the outputs that require grad (None for every
    input when none does)."""
    from kiln.autograd import grad
    seeds = grad_outputs if grad_outputs is not None else (None,) * len(outputs)
    kept = [(o, g) for o, g in zip(outputs, seeds) if o is not None and o.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    given = [g for _, g in kept if g is not None]
    return grad([o for o, _ in kept], list(inputs), given if len(given) == len(kept) else None,
                retain_graph=retain_graph, create_graph=create_graph, allow_unused=True)


def _zeros_for_none(grads: tuple[Tensor | None, ...], like: tuple[Tensor, ...],
                    strict: bool) -> tuple[Tensor, ...]:
    import kiln
    out = []
    for i, (g, ref) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode.")
            g = kiln.zeros_like(ref)
        out.append(g)
    return tuple(out)


def _check_v(v: tuple[Tensor, ...], other: tuple[Tensor, ...], is_tuple: bool) -> None:
    if len(v) != len(other):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                           f"{len(v)}." if is_tuple else "The given v should contain a single "
                           "Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            prefix = f"Entry {i} in " if is_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {tuple(b.shape)} but got "
                               f"{tuple(a.shape)}.")


def vjp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T J): the vector-Jacobian product."""
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _prepare(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "vjp")
        _check_requires_grad(outs, "outputs", strict)
        if v is not None:
            _, vs = _as_tuple(v, "v", "vjp")
            vs = _prepare(vs, create_graph, need_graph=False)
            _check_v(vs, outs, is_outputs_tuple)
        else:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function "
                                   "returns a single Tensor with a single element.")
            vs = None
        result = _zeros_for_none(_grad(outs, ins, vs, create_graph), ins, strict)
    return (_untuple(_finish(outs, create_graph), is_outputs_tuple),
            _untuple(_finish(result, create_graph), is_inputs_tuple))


def _inputs_and_vector(inputs: Any, v: Any, create_graph: bool,
                       name: str) -> tuple[bool, tuple[Tensor, ...], tuple[Tensor, ...] | None]:
    """jvp's, vhp's and hvp's inputs made differentiable, and their vector v
    (one per input; None only for a single one-element input)."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", name)
    ins = _prepare(ins, create_graph, need_graph=True)
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        return is_inputs_tuple, ins, None
    _, vs = _as_tuple(v, "v", name)
    vs = _prepare(vs, create_graph, need_graph=False)
    _check_v(vs, ins, is_inputs_tuple)
    return is_inputs_tuple, ins, vs


def jvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), J v): the Jacobian-vector product, by differentiating
    a vjp w.r.t. its vector."""
    with enable_grad():
        is_inputs_tuple, ins, vs = _inputs_and_vector(inputs, v, create_graph, "jvp")
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "jvp")
        _check_requires_grad(outs, "outputs", strict)
        # The vjp is linear in its vector: any finite value serves.
        seeds = tuple(_C.zeros(list(o.shape), o.dtype, True) for o in outs)
        grad_inputs = _grad(outs, ins, seeds, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
        result = _zeros_for_none(_grad(grad_inputs, seeds, vs, create_graph), outs, strict)
    return (_untuple(_finish(outs, create_graph), is_outputs_tuple),
            _untuple(_finish(result, create_graph), is_outputs_tuple))


def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False,
             strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Any:
    """d func / d inputs: a Tensor of shape output.shape + input.shape, or
    tuples of them (per output, then per input) as the arguments are."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: '
                         'If your function has more outputs than inputs, "forward-mode" tends to '
                         'be more performant. Otherwise, prefer to use "reverse-mode".')
    import kiln
    with enable_grad():
        is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        ins = _prepare(ins, create_graph, need_graph=True)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           "jacobian")
        _check_requires_grad(outs, "outputs", strict)
        rows: list[tuple[Tensor, ...]] = []
        for out in outs:
            per_input: list[list[Tensor]] = [[] for _ in ins]
            flat = out.reshape(-1)
            for j in range(out.numel()):
                grads = _grad((flat[j],), ins, retain_graph=True, create_graph=create_graph)
                for k, g in enumerate(_zeros_for_none(grads, ins, strict)):
                    per_input[k].append(g)
            rows.append(tuple(
                kiln.stack(per_input[k], 0).reshape(tuple(out.shape) + tuple(ins[k].shape))
                if per_input[k] else kiln.zeros(tuple(out.shape) + tuple(ins[k].shape),
                                                 dtype=ins[k].dtype)
                for k in range(len(ins))))
    return _untuple(_finish(tuple(rows), create_graph), (is_outputs_tuple, is_inputs_tuple))


def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False,
            strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of a scalar function: shape input.shape + input.shape, or
    a tuple of tuples (per input pair) for several inputs."""
    is_inputs_tuple, ins = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*args: Tensor) -> Tensor:
        out = func(*args)
        is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(outs, "outputs", strict)
        if is_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def gradient(*args: Tensor) -> Any:
        return jacobian(scalar, args, create_graph=True)

    res = jacobian(gradient, ins, create_graph=create_graph, strict=strict)
    return _untuple(res, (is_inputs_tuple, is_inputs_tuple))


def vhp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T H) for a scalar function."""
    return _vector_hessian(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), H v) for a scalar function (H is symmetric: v^T H)."""
    return _vector_hessian(func, inputs, v, create_graph, strict, "hvp")


def _vector_hessian(func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool,
                    strict: bool, name: str) -> tuple[Any, Any]:
    with enable_grad():
        is_inputs_tuple, ins, vs = _inputs_and_vector(inputs, v, create_graph, name)
        is_outputs_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function",
                                           name)
        _check_requires_grad(outs, "outputs", strict)
        if is_outputs_tuple:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {name} should "
                               "contain a single element")
        first = _grad(outs, ins, create_graph=True)
        _check_requires_grad(first, "jacobian", strict)
    with set_grad_enabled(True if create_graph else _C.is_grad_enabled()):
        result = _zeros_for_none(_grad(first, ins, vs, create_graph), ins, strict)
    return (_untuple(_finish(outs, create_graph), is_outputs_tuple),
            _untuple(_finish(result, create_graph), is_inputs_tuple))
