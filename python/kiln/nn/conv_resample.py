"""Conv1d, the transposed convolutions, GroupNorm and InstanceNorm, the
resampling layers (Upsample, PixelShuffle) and the padding layers, shaped
like torch.nn's: the same arguments, defaults, reprs, parameter and buffer
names (so torch's state_dict loads) and initialization (kiln.nn.init, with
torch's formulas). Each forward is one of kiln.nn.functional's bound C++
functions; the modules hold arguments, nothing of the math."""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, cast

from kiln import _C
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._device import check_device
from kiln._factories import empty, ones, tensor, zeros
from kiln._grad_mode import no_grad
from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.module import Module
from kiln.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
           "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d",
           "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
           "ReplicationPad2d", "CircularPad1d", "CircularPad2d"]

IntOrSeq = int | Sequence[int]


def _ntuple(v: IntOrSeq, n: int) -> tuple[int, ...]:
    """torch's _single / _pair / _quadruple: an int repeated, a sequence kept."""
    return (v,) * n if isinstance(v, int) else tuple(v)


def _factory(device: Any, dtype: DType | None, what: str) -> DType | None:
    check_device(device, what)
    return dtype


# -- convolutions -------------------------------------------------------------

class _ConvNd(Module):
    """torch's _ConvNd: the checks, the parameters and their init."""

    _spatial = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrSeq,
                 stride: IntOrSeq, padding: IntOrSeq | str, dilation: IntOrSeq,
                 transposed: bool, output_padding: IntOrSeq, groups: int, bias: bool,
                 padding_mode: str, device: Any, dtype: DType | None) -> None:
        super().__init__()
        dtype = _factory(device, dtype, type(self).__name__)
        n = self._spatial
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.dilation, self.output_padding = _ntuple(dilation, n), _ntuple(output_padding, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError("padding_mode must be one of {'zeros', 'reflect', 'replicate', "
                             f"'circular'}}, but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.padding: tuple[int, ...] | str = (padding if isinstance(padding, str)
                                               else _ntuple(padding, n))
        self.transposed, self.groups, self.padding_mode = transposed, groups, padding_mode
        self._reversed_padding_repeated_twice = self._padding_for_pad()
        shape = ((in_channels, out_channels // groups) if transposed
                 else (out_channels, in_channels // groups))
        self.weight = Parameter(empty(*shape, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _padding_for_pad(self) -> list[int]:
        """The padding as F.pad takes it (last dim first), for the padding
        modes other than zeros; "same" puts an odd extra element last."""
        if not isinstance(self.padding, str):
            return [p for p in reversed(self.padding) for _ in range(2)]
        pads = [0, 0] * len(self.kernel_size)
        if self.padding == "same":
            for i, (d, k) in enumerate(zip(reversed(self.dilation), reversed(self.kernel_size),
                                           strict=True)):
                total = d * (k - 1)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        return pads

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d / Conv2d: a convolution over `_spatial` dims with torch's
    padding modes (zeros, or reflect/replicate/circular through F.pad) and
    padding strings ("same", "valid")."""

    _functional: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrSeq,
                 stride: IntOrSeq = 1, padding: IntOrSeq | str = 0, dilation: IntOrSeq = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: DType | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        conv = type(self)._functional
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)
        padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
        return conv(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


class Conv1d(_Conv):
    _functional = staticmethod(F.conv1d)


class Conv2d(_Conv):
    _spatial = 2
    _functional = staticmethod(F.conv2d)


class Conv3d(_Conv):
    _spatial = 3
    _functional = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d / ConvTranspose2d (torch's argument order: groups,
    bias and dilation after output_padding); forward's output_size picks
    the output_padding that gives it."""

    _functional: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrSeq,
                 stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                 groups: int = 1, bias: bool = True, dilation: IntOrSeq = 1,
                 padding_mode: str = "zeros", device: Any = None,
                 dtype: DType | None = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size: Sequence[int] | None) -> list[int]:
        """The module's output_padding, or the one that gives output_size
        (its spatial sizes, or with the batch and channel sizes too)."""
        if output_size is None:
            return list(self.output_padding)
        return _C.nn.conv_transpose_output_padding(
            input, [int(s) for s in output_size], list(self.stride), list(self.padding),
            list(self.kernel_size), list(self.dilation), self._spatial)

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        padding = cast(tuple[int, ...], self.padding)  # never a string here
        return type(self)._functional(input, self.weight, self.bias, self.stride, padding,
                                      self._output_padding(input, output_size), self.groups,
                                      self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    _functional = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    _spatial = 2
    _functional = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    _spatial = 3
    _functional = staticmethod(F.conv_transpose3d)


# -- 3-D pooling ----------------------------------------------------------------

class MaxPool3d(Module):
    def __init__(self, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
                 padding: IntOrSeq = 0, dilation: IntOrSeq = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        if return_indices:
            raise NotImplementedError("MaxPool3d: return_indices is not supported yet")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(Module):
    def __init__(self, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
                 padding: IntOrSeq = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# -- normalization ------------------------------------------------------------

class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: DType | None = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        dtype = _factory(device, dtype, "GroupNorm")
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        if affine:
            self.weight = Parameter(ones(num_channels, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(num_channels, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(Module):
    """torch's _InstanceNorm: unlike BatchNorm, affine and
    track_running_stats are off by default, and num_batches_tracked is
    kept but never counted (a momentum of None is 0)."""

    _no_batch_dim = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: DType | None = None, *, bias: bool = True) -> None:
        super().__init__()
        dtype = _factory(device, dtype, type(self).__name__)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        unbatched = self._no_batch_dim
        if input.ndim not in (unbatched, unbatched + 1):
            raise ValueError(f"expected {unbatched}D or {unbatched + 1}D input "
                             f"(got {input.ndim}D input)")
        feature_dim = input.ndim - unbatched
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        batched = input.unsqueeze(0) if input.ndim == unbatched else input
        out = F.instance_norm(batched, self.running_mean, self.running_var, self.weight,
                              self.bias, self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if input.ndim == unbatched else out

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Over [N, C, L] or unbatched [C, L]."""


class InstanceNorm2d(_InstanceNorm):
    """Over [N, C, H, W] or unbatched [C, H, W]."""

    _no_batch_dim = 3


# -- resampling ---------------------------------------------------------------

class Upsample(Module):
    def __init__(self, size: IntOrSeq | None = None,
                 scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor: float | tuple[float, ...] | None
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None  # type: ignore[arg-type]
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    def __init__(self, size: IntOrSeq | None = None,
                 scale_factor: float | Sequence[float] | None = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size: IntOrSeq | None = None,
                 scale_factor: float | Sequence[float] | None = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


# -- padding ------------------------------------------------------------------

class _PadNd(Module):
    """F.pad with a fixed mode; padding is one int for every side, or
    (left, right[, top, bottom])."""

    _mode = "constant"
    _sides = 2

    def __init__(self, padding: IntOrSeq) -> None:
        super().__init__()
        self.padding = _ntuple(padding, self._sides)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _CheckedPadNd(_PadNd):
    """torch checks the input's dims in its circular padding modules only."""

    def forward(self, input: Tensor) -> Tensor:
        batched = self._sides // 2 + 2
        if input.ndim not in (batched - 1, batched):
            raise ValueError(f"expected {batched - 1}D or {batched}D input "
                             f"(got {input.ndim}D input)")
        return F.pad(input, self.padding, self._mode)


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: IntOrSeq, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    pass


class ConstantPad2d(_ConstantPadNd):
    _sides = 4


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding: IntOrSeq) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding: IntOrSeq) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    _mode, _sides = "reflect", 4


class ReplicationPad1d(_PadNd):
    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    _mode, _sides = "replicate", 4


class CircularPad1d(_CheckedPadNd):
    _mode = "circular"


class CircularPad2d(_CheckedPadNd):
    _mode, _sides = "circular", 4
