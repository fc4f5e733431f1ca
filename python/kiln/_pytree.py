"""Pytrees: a tensor, or tuples, lists and dicts of pytrees. flatten() lists
the tensors and returns a spec to rebuild the structure; both kiln.jit (a
traced function's outputs) and the control-flow ops (operands, carried
values) use it."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from kiln import _C
from kiln._C import Tensor

# How to rebuild a structure from its flat list of tensors: LEAF for a
# tensor, NONE for None (a model returning (logits, None), as PyTorch
# models do for an optional output), (tuple or list, items) or (dict,
# keys, items) for containers.
Spec = Any
LEAF = "tensor"
NONE = "none"


def flatten(obj: Any, out: list[Tensor], what: str = "a traced function's result") -> Spec:
    """Appends obj's tensors to `out`; returns the structure to rebuild it."""
    if isinstance(obj, _C.Tensor):
        out.append(obj)
        return LEAF
    if obj is None:
        return NONE
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(flatten(item, out, what) for item in obj))
    if isinstance(obj, dict):
        return (dict, tuple(obj), tuple(flatten(v, out, what) for v in obj.values()))
    raise TypeError(f"{what} must be tensors (or None), or tuples, lists or dicts of them; "
                    f"it holds a {type(obj).__name__}")


def unflatten(spec: Spec, flat: Sequence[Tensor]) -> Any:
    if spec is LEAF:
        return flat[0]
    values = iter(flat)
    return _build(spec, values)


def _build(spec: Spec, values: Iterator[Tensor]) -> Any:
    if spec is LEAF:
        return next(values)
    if spec is NONE:
        return None
    if spec[0] is dict:
        return {key: _build(s, values) for key, s in zip(spec[1], spec[2])}
    return spec[0](_build(s, values) for s in spec[1])


def describe(spec: Spec) -> str:
    """The structure as text, for errors: (tensor, [tensor, tensor])."""
    if spec is LEAF:
        return "tensor"
    if spec is NONE:
        return "None"
    if spec[0] is dict:
        return "{" + ", ".join(f"{k!r}: {describe(s)}" for k, s in zip(spec[1], spec[2])) + "}"
    inner = ", ".join(describe(s) for s in spec[1])
    return f"[{inner}]" if spec[0] is list else f"({inner}{',' if len(spec[1]) == 1 else ''})"
