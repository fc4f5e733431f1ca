"""nn.Parameter: a Tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from kiln import _C
from kiln._C import Tensor


class Parameter(_C.Tensor):
    """A leaf tensor sharing `data`'s memory, with requires_grad set (as
    torch.nn.Parameter). Assigning one to a Module attribute registers it."""

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = _C.empty([0], None, False)
        super().__init__(data.detach())
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + _C.Tensor.__repr__(self)

    __str__ = __repr__
