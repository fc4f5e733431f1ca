"""kiln.autograd: gradients without touching .grad (grad), custom functions
(Function), tensor hooks (Tensor.register_hook, retain_grad,
register_post_accumulate_grad_hook), callbacks at the end of a backward
(queue_callback), finite-difference checks (gradcheck, gradgradcheck) and the functional API
(kiln.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp), as
torch.autograd."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from kiln import _C
from kiln._C import Tensor
from kiln._missing import module_getattr
from kiln.autograd.function import Function, FunctionCtx, once_differentiable
from kiln.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

from . import functional

__all__ = ["grad", "increment_version", "queue_callback", "Function", "FunctionCtx",
           "once_differentiable", "gradcheck", "gradgradcheck", "GradcheckError", "functional"]


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor] | None = None,
         retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple[Tensor | None, ...]:
    """d(outputs)/d(inputs), one entry per input (None where unused)."""
    outputs = [outputs] if isinstance(outputs, _C.Tensor) else list(outputs)
    single = isinstance(inputs, _C.Tensor)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None:
        grad_outputs = []
    elif isinstance(grad_outputs, _C.Tensor):
        grad_outputs = [grad_outputs]
    retain = create_graph if retain_graph is None else retain_graph
    return tuple(_C.autograd_grad(outputs, inputs, list(grad_outputs), retain, create_graph,
                                  allow_unused))


def increment_version(tensor: Tensor) -> None:
    """Marks `tensor` as modified, as torch.autograd.graph.increment_version
    does. kiln's own in-place ops do this themselves; a write through memory
    shared with another library (tensor.detach().numpy(), DLPack, the buffer
    protocol) does not, so call this after one. Compiled models keep packed
    copies of weights keyed on this counter and repack when it moves."""
    tensor._bump_version()


# -- tensor hooks (C++: kiln/autograd/hooks.h) ---------------------------------
def _register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> object:
    """Calls hook(grad) whenever a gradient w.r.t. this tensor is computed;
    a tensor it returns replaces the gradient. Returns a handle whose
    remove() unregisters it."""
    return _C.autograd.register_hook(self, hook)


def _register_post_accumulate_grad_hook(self: Tensor, hook: Callable[[Tensor], None]) -> object:
    """Calls hook(tensor) after each backward accumulated a gradient into
    this leaf's .grad (the hook returns None). Returns a handle whose
    remove() unregisters it."""
    return _C.autograd.register_post_accumulate_grad_hook(self, hook)


def queue_callback(callback: Callable[[], None]) -> None:
    """Runs callback() once the backward now running has walked its whole
    graph, before backward() returns (torch's
    Variable._execution_engine.queue_callback); only from inside a backward,
    e.g. from a hook."""
    _C.autograd.queue_callback(callback)


def _retain_grad(self: Tensor) -> None:
    """Makes backward fill this non-leaf tensor's .grad (a no-op on leaves)."""
    _C.autograd.retain_grad(self)


def _install_tensor_methods() -> None:
    cls = _C.Tensor
    cls.register_hook = _register_hook
    cls.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
    cls.retain_grad = _retain_grad
    cls.retains_grad = property(_C.autograd.retains_grad)
    # The node that made this tensor (name(), next_functions), None for a leaf.
    cls.grad_fn = property(_C.autograd.grad_fn)


_install_tensor_methods()


__getattr__ = module_getattr("kiln.autograd", "torch.autograd")
