"""kiln.nn.functional's convolutions beyond conv2d, padding, resampling and
the group and instance norms, with torch's signatures. Each is kiln/nn's
C++ function (conv_layers.h, resample_layers.h, normalization.h), bound once
(kiln._C.nn); here an int becomes the list the C++ takes, nothing more. The
modules of kiln.nn.conv_resample call these."""
from __future__ import annotations

import warnings
from collections.abc import Sequence

from kiln import _C
from kiln._C import Tensor

__all__ = ["conv1d", "conv_transpose1d", "conv_transpose2d", "pad", "interpolate", "upsample",
           "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle",
           "group_norm", "instance_norm"]

# An int for every spatial dim, or one per dim: stride=2 or (2, 1).
IntOrSeq = int | Sequence[int]


def _ints(v: IntOrSeq, n: int) -> list[int]:
    """torch's _single / _pair: an int repeated n times, a sequence as given
    (the C++ says when its length is wrong)."""
    return [v] * n if isinstance(v, int) else list(v)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrSeq = 1,
           padding: IntOrSeq | str = 0, dilation: IntOrSeq = 1, groups: int = 1) -> Tensor:
    """Over [N, C, L] or [C, L]; padding may be "same" or "valid"."""
    pads: list[int] | str = padding if isinstance(padding, str) else _ints(padding, 1)
    return _C.nn.conv1d(input, weight, bias, _ints(stride, 1), pads, _ints(dilation, 1), groups)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1) -> Tensor:
    return _C.nn.conv_transpose1d(input, weight, bias, _ints(stride, 1), _ints(padding, 1),
                                  _ints(output_padding, 1), groups, _ints(dilation, 1))


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1) -> Tensor:
    return _C.nn.conv_transpose2d(input, weight, bias, _ints(stride, 2), _ints(padding, 2),
                                  _ints(output_padding, 2), groups, _ints(dilation, 2))


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """(before, after) pairs from the last dim backwards; mode "constant"
    (negative padding crops), "reflect", "replicate" or "circular"."""
    return _C.nn.pad(input, list(pad), mode, None if value is None else float(value))


def _per_dim(v: object, dims: int, convert: type) -> list | None:
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return [convert(v)] * max(dims, 0)
    return [convert(x) for x in v]  # type: ignore[attr-defined]


def interpolate(input: Tensor, size: IntOrSeq | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resizes [N, C, L] ("nearest", "nearest-exact", "linear") or
    [N, C, H, W] ("nearest", "nearest-exact", "bilinear", "bicubic") to `size`, or by
    `scale_factor` (the output size floored)."""
    dims = input.ndim - 2
    return _C.nn.interpolate(input, _per_dim(size, dims, int),
                             _per_dim(scale_factor, dims, float), mode, align_corners,
                             recompute_scale_factor, antialias)


def upsample(input: Tensor, size: IntOrSeq | None = None,
             scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: IntOrSeq | None = None,
                     scale_factor: float | Sequence[float] | None = None) -> Tensor:
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: IntOrSeq | None = None,
                      scale_factor: float | Sequence[float] | None = None) -> Tensor:
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """[*, C r², H, W] -> [*, C, H r, W r]."""
    return _C.nn.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """[*, C, H r, W r] -> [*, C r², H, W]."""
    return _C.nn.pixel_unshuffle(input, downscale_factor)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalizes [N, C, *] over each group of C / num_groups channels."""
    return _C.nn.group_norm(input, num_groups, weight, bias, float(eps))


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalizes [N, C, *] per sample and channel. With use_input_stats the
    running statistics (when given) move towards the batch's, in place."""
    return _C.nn.instance_norm(input, running_mean, running_var, weight, bias,
                               use_input_stats, float(momentum), float(eps))
