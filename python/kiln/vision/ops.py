"""kiln.vision.ops: torchvision.ops.roi_pool and deform_conv2d, with
torchvision's signatures, over kiln's ops max_roi_pool and deform_conv2d
(ONNX's MaxRoiPool and DeformConv: ops/roi_pool_ops.cpp,
ops/deform_conv_ops.cpp). Both trace, compile and differentiate like any
op: roi_pool w.r.t. its input (the boxes' coordinates are rounded to whole
pixels, so they get no gradient, as in torchvision), deform_conv2d w.r.t.
input, offset, weight, bias and mask."""
from __future__ import annotations

from collections.abc import Sequence

import kiln
from kiln import _C
from kiln._C import Tensor

__all__ = ["roi_pool", "deform_conv2d"]


def _pair(value: int | Sequence[int], name: str) -> list[int]:
    if isinstance(value, int):
        return [value, value]
    values = [int(v) for v in value]
    if len(values) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {value}")
    return values


def _rois(boxes: Tensor | Sequence[Tensor]) -> Tensor:
    """torchvision's box formats as [K, 5] rois: a tensor is one already; a
    list holds each image's [L, 4] boxes, whose index in the list becomes
    their batch index."""
    if isinstance(boxes, Tensor):
        return boxes
    columns = []
    for index, per_image in enumerate(boxes):
        batch = kiln.full([per_image.shape[0], 1], float(index), dtype=per_image.dtype)
        columns.append(kiln.cat([batch, per_image], 1))
    return kiln.cat(columns, 0)


def roi_pool(input: Tensor, boxes: Tensor | Sequence[Tensor], output_size: int | Sequence[int],
             spatial_scale: float = 1.0) -> Tensor:
    """torchvision.ops.roi_pool: Fast R-CNN's max pooling of regions.

    input [N, C, H, W]; boxes a [K, 5] tensor of (batch index, x1, y1, x2,
    y2) or a list of [L, 4] tensors of (x1, y1, x2, y2), one per image;
    output_size (h, w) or one int for both. Each box, scaled by
    spatial_scale and rounded (half away from zero) to whole pixels, is cut
    into h x w bins; a bin gives the maximum of its pixels per channel, or
    0 where it covers none. Returns [K, C, h, w]."""
    pooled = _pair(output_size, "roi_pool: output_size")
    return _C.dispatch("max_roi_pool", [input, _rois(boxes)],
                       {"pooled_shape": pooled, "spatial_scale": float(spatial_scale)})


def deform_conv2d(input: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None = None,
                  stride: int | Sequence[int] = (1, 1), padding: int | Sequence[int] = (0, 0),
                  dilation: int | Sequence[int] = (1, 1), mask: Tensor | None = None) -> Tensor:
    """torchvision.ops.deform_conv2d: deformable convolution, v1 (no mask)
    and v2 (mask).

    input [N, C, H, W]; weight [M, C / groups, kh, kw]; offset
    [N, 2 * offset_groups * kh * kw, OH, OW], per kernel tap a (dy, dx)
    shift of its sampling point; mask [N, offset_groups * kh * kw, OH, OW]
    scales each sample; bias [M]. Points are read by bilinear
    interpolation, zero outside the input. groups and offset_groups follow
    from the shapes, as in torchvision. Returns [N, M, OH, OW]."""
    taps = weight.shape[2] * weight.shape[3]
    groups = input.shape[1] // weight.shape[1] if weight.shape[1] else 1
    offset_groups = offset.shape[1] // (2 * taps) if taps else 1
    return _C.dispatch("deform_conv2d", [input, weight, offset, bias, mask],
                       {"stride": _pair(stride, "deform_conv2d: stride"),
                        "padding": _pair(padding, "deform_conv2d: padding"),
                        "dilation": _pair(dilation, "deform_conv2d: dilation"),
                        "groups": max(groups, 1), "offset_groups": max(offset_groups, 1)})
