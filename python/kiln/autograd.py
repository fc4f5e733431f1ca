"""kiln.autograd: gradients without touching .grad, as torch.autograd.grad."""
from __future__ import annotations

from collections.abc import Sequence

from kiln import _C
from kiln._C import Tensor


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
