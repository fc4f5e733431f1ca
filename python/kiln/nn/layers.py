"""The layers, in Python over kiln.nn.functional, with PyTorch's default
initialization and reprs. The layers of a typical forward pass (Linear,
Conv2d, the activations, pooling, Flatten) call their op's typed binding
(kiln._C.linear, ...) directly with arguments prepared in __init__: per call,
a forward is one attribute read per parameter and one call into C++."""
from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from kiln import _C
from kiln import _ops as K
from kiln._C import Tensor
from kiln._device import check_device
from kiln._factories import arange, ones, rand, randn, tensor, zeros
from kiln._grad_mode import no_grad
from kiln.nn import functional as F
from kiln.nn.functional import Pair
from kiln.nn.module import Module
from kiln.nn.parameter import Parameter


def _uniform(shape: tuple[int, ...], bound: float) -> Parameter:
    """U(-bound, bound): what kaiming_uniform_(a=sqrt(5)) and the bias init
    of torch's Linear/Conv2d both come to."""
    with no_grad():
        return Parameter(rand(*shape) * (2.0 * bound) - bound)


def _pair(v: Pair) -> tuple[int, ...]:
    return (v, v) if isinstance(v, int) else tuple(v)


class Identity(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = _uniform((out_features, in_features), bound)
        if bias:
            self.bias = _uniform((out_features,), bound)
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return _C.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace) if self.inplace else _C.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return _C.sigmoid(input)


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return _C.tanh(input)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate='{self.approximate}'"


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class _Pool2d(Module):
    def __init__(self, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding


class MaxPool2d(_Pool2d):
    def __init__(self, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0,
                 dilation: Pair = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding)
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        if self.return_indices:  # (values, indices), as torch's
            from kiln.nn import functional as F

            return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                self.ceil_mode, return_indices=True)
        return _C.max_pool2d(input, _pair(self.kernel_size), _pair(self.stride),
                             _pair(self.padding), _pair(self.dilation), self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(_Pool2d):
    def __init__(self, kernel_size: Pair, stride: Pair | None = None, padding: Pair = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return _C.avg_pool2d(input, _pair(self.kernel_size), _pair(self.stride),
                             _pair(self.padding), self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size: Pair) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return _C.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Dropout(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace=False"


class _BatchNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *,
                 bias: bool = True) -> None:
        super().__init__()
        self._has_bias = bias
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features))
            if bias:
                self.bias = Parameter(zeros(num_features))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features))
            self.register_buffer("running_var", ones(num_features))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            # In place, as torch does: a compiled forward records the write
            # and repeats it on every call (rebinding would be invisible).
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch_stats = self.training or not self.track_running_stats
        pass_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if pass_running else None,
                            self.running_var if pass_running else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self._has_bias}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class LayerNorm(Module):
    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps = tuple(normalized_shape), eps
        self.elementwise_affine, self._has_bias = elementwise_affine, bias
        if elementwise_affine:
            self.weight = Parameter(ones(*self.normalized_shape))
            if bias:
                self.bias = Parameter(zeros(*self.normalized_shape))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self._has_bias}")


class Embedding(Module):
    """A lookup table: weight [num_embeddings, embedding_dim] ~ N(0, 1), the
    padding_idx row zeroed and given no gradient. With max_norm, each row a
    forward looks up is first rescaled in place to at most that norm."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        check_device(device, "Embedding")
        super().__init__()
        if scale_grad_by_freq:
            raise NotImplementedError("Embedding: scale_grad_by_freq=True is not supported by "
                                      "kiln")
        if sparse:
            raise NotImplementedError("Embedding: sparse=True (sparse gradients) is not "
                                      "supported by kiln")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx += num_embeddings
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            with no_grad():
                weight = randn(num_embeddings, embedding_dim, dtype=dtype)
                if padding_idx is not None:
                    mask = K.unsqueeze(K.ne(arange(num_embeddings), padding_idx), 1)
                    weight = K.where(mask, weight, 0.0)
        else:
            assert list(_weight.shape) == [num_embeddings, embedding_dim], \
                "Shape of weight does not match num_embeddings and embedding_dim"
            weight = _weight
        self.weight = Parameter(weight, requires_grad=not _freeze)

    def forward(self, input: Tensor) -> Tensor:
        if self.max_norm is not None:
            _C.nn.embedding_renorm_(self.weight, input, float(self.max_norm),
                                    float(self.norm_type))
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding over the given [rows, dim] weights (shared, not
        copied, the padding_idx row kept as given); freeze=True keeps them
        out of training."""
        assert embeddings.dim() == 2, "Embeddings parameter is expected to be 2-dimensional"
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)


class Sequential(Module):
    # The overloads are for type checkers only: at run time typing.overload's
    # registry would hold them, and through them this module's globals, past
    # interpreter shutdown (nanobind then reports kiln._C objects as leaked).
    if TYPE_CHECKING:
        @overload
        def __init__(self, *args: Module) -> None: ...

        @overload
        def __init__(self, arg: OrderedDict[str, Module], /) -> None: ...

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    # A Sequential's entries are modules, never None (the `type: ignore`s).
    def forward(self, input: Tensor) -> Tensor:
        for module in self._modules.values():
            input = module(input)  # type: ignore[misc]
        return input

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    if TYPE_CHECKING:
        @overload
        def __getitem__(self, index: int) -> Module: ...

        @overload
        def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module | Sequential:
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))  # type: ignore[arg-type]
        modules = list(self._modules.values())
        return modules[index]  # type: ignore[return-value]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for module in modules or []:
            self.append(module)

    # Its entries are modules, never None (the `type: ignore`s).
    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]  # type: ignore[return-value]
