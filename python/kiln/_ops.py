"""One Python function per op of the table, under the op's (PyTorch's) name:
kiln.relu(x), kiln.sum(x, 1), x.view(2, 3). Inputs are positional; further
positional arguments fill the op's attributes in their declared order, and
attributes may be given by keyword (`dim` is accepted for an op's `dims`, as
PyTorch spells it). Each function is a direct call of kiln._C.dispatch with
the op's OpDef. (kiln.nn's layers call the few ops a forward pass needs
through their typed bindings instead, kiln._C.linear and friends.)"""

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kiln import _C

__all__: list[str] = []
# Ops that take no tensor (uniform, normal, randint): functions, never Tensor methods.
FACTORY_OPS: set[str] = set()

if TYPE_CHECKING:
    # The op functions are made at import time (_install), so a type checker
    # cannot list them: to it, any other name of this module is an op, of
    # type Any. Unannotated on purpose: mypy 2.4.1 leaves an annotated
    # module __getattr__ unresolved inside kiln's import cycle (every call of
    # an op then fails as "Any? not callable", depending on file order).
    def __getattr__(name):  # type: ignore[no-untyped-def]
        ...


# Ops only graphs call: DDP emits them while a step records
# (kiln.distributed's all_reduce is the user's call).
_GRAPH_ONLY = {"all_reduce_start", "all_reduce_wait"}

# Ops whose one list attribute PyTorch also takes as varargs: x.view(2, 3).
_SIZE_VARARGS = {"view", "reshape", "permute", "expand"}


def _make_op(name: str, min_inputs: int, max_inputs: int,
             attr_names: list[str]) -> Callable[..., Any]:
    variadic = max_inputs < 0
    size_varargs = name in _SIZE_VARARGS
    takes_dims = "dims" in attr_names
    op_def = _C.op(name)  # looked up once, not by name on every call
    dispatch = _C.dispatch

    def op(*args: Any, **kwargs: Any) -> Any:
        inputs: Sequence[Any]
        if not variadic:
            # The common call: tensors only, every attribute at its default.
            if not kwargs and min_inputs <= len(args) <= max_inputs:
                return dispatch(op_def, args)
            inputs, rest = args[:max_inputs], args[max_inputs:]
            if len(inputs) < min_inputs:
                raise TypeError(f"{name}() takes at least {min_inputs} tensor arguments, "
                                f"got {len(inputs)}")
        else:
            inputs, rest = list(args[0]), args[1:]
        if size_varargs and rest and isinstance(rest[0], (int, _C.SymInt)):
            rest = (list(rest),)
        if len(rest) > len(attr_names):
            raise TypeError(f"{name}() got {len(rest)} extra positional arguments; its "
                            f"attributes are {attr_names}")
        attrs = dict(zip(attr_names, rest))
        attrs.update(kwargs)
        if takes_dims:  # PyTorch's dim=1 or dim=(0, 1) is the op's dims list
            if "dim" in attrs:
                attrs["dims"] = attrs.pop("dim")
            if isinstance(attrs.get("dims"), int):
                attrs["dims"] = [attrs["dims"]]
        return dispatch(op_def, inputs, attrs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"kiln op `{name}`: attributes {', '.join(attr_names) or '(none)'}"
    return op


def _install() -> None:
    for name, min_inputs, max_inputs, _, attrs in _C.op_schemas():
        if name.endswith("_backward") or name in _GRAPH_ONLY:
            continue  # gradient kernels and graph-only ops, not user API
        globals()[name] = _make_op(name, min_inputs, max_inputs, [a[0] for a in attrs])
        __all__.append(name)
        if max_inputs == 0:
            FACTORY_OPS.add(name)


_install()
