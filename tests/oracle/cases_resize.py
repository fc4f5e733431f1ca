"""Rows for resize (ONNX Resize's semantics over any rank) and resize_backward,
in the modes PyTorch computes too: nearest as asymmetric + floor (PyTorch's
"nearest") and half_pixel + round_prefer_ceil ("nearest-exact"), linear as
half_pixel or align_corners ((bi, tri)linear), cubic with A = -0.75
(bicubic). The backward rows are PyTorch's aten backward ops. The modes only
ONNX has are checked against ONNX Runtime in
tests/python/test_onnx_resize_modes.py."""
import dataclasses

import torch

from oracle import Case, absent, ints, randn, values

A = torch.ops.aten


def resize_attrs(size, mode, transform, rounding="round_prefer_floor"):
    return {"output_size": list(size), "mode": mode,
            "coordinate_transformation_mode": transform, "nearest_mode": rounding}


def scales_input(scales):
    """The scales tensor (per dim): it places the samples, no gradient."""
    if scales is None:
        return absent()
    return dataclasses.replace(values(list(scales)), requires_grad=False)


# PyTorch's op per (mode, rank) and how it is called: (t, spatial output
# size, align_corners, per-dim scales of the spatial dims).
def torch_resize(mode, rank, exact=False):
    if mode == "nearest":
        op = {3: A.upsample_nearest1d, 4: A.upsample_nearest2d, 5: A.upsample_nearest3d}
        if exact:
            op = {3: A._upsample_nearest_exact1d, 4: A._upsample_nearest_exact2d,
                  5: A._upsample_nearest_exact3d}
        return lambda t, size, corners, scales: op[rank](t, size, *scales)
    op = {3: A.upsample_linear1d, 4: A.upsample_bilinear2d, 5: A.upsample_trilinear3d}
    if mode == "cubic":
        op = {4: A.upsample_bicubic2d}
    return lambda t, size, corners, scales: op[rank](t, size, corners, *scales)


def resize(name, x, size, mode, transform, rounding="round_prefer_floor", scales=None,
           reduce_len=1):
    """A row for x [N, C, *spatial] resized to size [N, C, *out]."""
    rank = len(x.shape)
    corners = transform == "align_corners"
    spatial = list(size[2:])
    torch_scales = [None] * (rank - 2) if scales is None else list(scales[2:])
    fn = torch_resize(mode, rank, exact=rounding == "round_prefer_ceil")
    return Case("resize", [x, absent(), scales_input(scales)],
                lambda t, roi, s: fn(t, spatial, corners, torch_scales),
                attrs=resize_attrs(size, mode, transform, rounding), name=name,
                reduce_len=reduce_len)


def nearest(name, x, size, scales=None, reduce_len=1):
    return resize(name, x, size, "nearest", "asymmetric", "floor", scales, reduce_len)


def nearest_exact(name, x, size, scales=None, reduce_len=1):
    return resize(name, x, size, "nearest", "half_pixel", "round_prefer_ceil", scales,
                  reduce_len)


def linear(name, x, size, corners=False, scales=None, reduce_len=16):
    return resize(name, x, size, "linear", "align_corners" if corners else "half_pixel",
                  scales=scales, reduce_len=reduce_len)


def cubic(name, x, size, corners=False, scales=None, reduce_len=64):
    return resize(name, x, size, "cubic", "align_corners" if corners else "half_pixel",
                  scales=scales, reduce_len=reduce_len)


def error(name, inputs, attrs, message):
    return Case("resize", inputs, attrs=attrs, name=name, error=message)


RESIZE = [
    nearest("nearest_double", randn(2, 3, 4, 5), (2, 3, 8, 10), reduce_len=4),
    nearest("nearest_scales", randn(1, 2, 3, 4), (1, 2, 7, 10), (1, 1, 2.5, 2.5), reduce_len=9),
    nearest("nearest_down", randn(2, 2, 7, 9), (2, 2, 3, 4)),
    nearest("nearest_1d", randn(2, 3, 5), (2, 3, 12), reduce_len=3),
    nearest("nearest_3d_transposed", randn(1, 2, 3, 4, 2, layout="transposed"),
            (1, 2, 5, 2, 6), reduce_len=8),
    nearest("nearest_f64_strided", randn(1, 2, 5, 3, dtype="float64", layout="strided"),
            (1, 2, 3, 7), reduce_len=9),
    nearest("nearest_empty_batch", randn(0, 3, 2, 2), (0, 3, 4, 4)),
    nearest_exact("nearest_exact_up", randn(2, 3, 3, 4), (2, 3, 7, 9), reduce_len=9),
    nearest_exact("nearest_exact_f64_down_expanded",
                  randn(2, 3, 9, 7, dtype="float64", layout="expanded"), (2, 3, 4, 3)),
    Case("resize", [ints(-9, 9, 2, 3, 2, 3), absent(), absent()],
         lambda t, roi, s: t.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3),
         attrs=resize_attrs((2, 3, 4, 6), "nearest", "asymmetric", "floor"),
         name="nearest_int_double"),
    linear("linear_up", randn(2, 3, 4, 5), (2, 3, 8, 10)),
    linear("linear_down", randn(1, 2, 9, 8), (1, 2, 4, 3)),
    linear("linear_align_corners", randn(1, 2, 3, 4), (1, 2, 7, 9), corners=True),
    linear("linear_scales", randn(1, 2, 3, 5), (1, 2, 5, 8), scales=(1, 1, 1.7, 1.7)),
    linear("linear_to_one", randn(2, 2, 4, 5), (2, 2, 1, 1)),
    linear("linear_1d", randn(2, 3, 5), (2, 3, 9), reduce_len=4),
    linear("linear_3d_align_corners", randn(1, 2, 3, 2, 4), (1, 2, 5, 3, 3), corners=True,
           reduce_len=64),
    linear("linear_f64_transposed", randn(1, 3, 5, 4, dtype="float64", layout="transposed"),
           (1, 3, 9, 3)),
    cubic("cubic_up", randn(2, 3, 4, 5), (2, 3, 9, 11)),
    cubic("cubic_down", randn(1, 2, 9, 8), (1, 2, 4, 3)),
    cubic("cubic_align_corners", randn(1, 2, 4, 3), (1, 2, 7, 5), corners=True),
    cubic("cubic_scales", randn(1, 2, 4, 5), (1, 2, 6, 8), scales=(1, 1, 1.6, 1.7)),
    cubic("cubic_from_one", randn(1, 2, 1, 2), (1, 2, 3, 4)),
    cubic("cubic_f64_strided", randn(2, 2, 5, 4, dtype="float64", layout="strided"),
          (2, 2, 8, 3)),
    cubic("cubic_empty_batch", randn(0, 3, 3, 3), (0, 3, 5, 5)),
    error("int_linear", [ints(0, 5, 1, 1, 3, 4), absent(), absent()],
          resize_attrs((1, 1, 6, 8), "linear", "half_pixel"),
          "resize: linear mode expects a floating input, got int64"),
    error("output_size_rank", [randn(1, 2, 4, 4), absent(), absent()],
          resize_attrs((8, 8), "nearest", "asymmetric"),
          "resize: output_size [8, 8] must hold one size per dim of the input [1, 2, 4, 4]"),
    error("unknown_mode", [randn(1, 2, 4, 4), absent(), absent()],
          resize_attrs((1, 2, 8, 8), "area", "asymmetric"), "resize: unknown mode 'area'"),
    error("crop_without_roi", [randn(1, 2, 4, 4), absent(), absent()],
          resize_attrs((1, 2, 8, 8), "linear", "tf_crop_and_resize"),
          "resize: tf_crop_and_resize needs a roi"),
    error("scales_count", [randn(1, 2, 4, 4), absent(), scales_input((2.0, 2.0))],
          resize_attrs((1, 2, 8, 8), "linear", "half_pixel"),
          "resize: scales must be a floating 1-D tensor of 4 values, got float32[2]"),
    error("from_empty", [randn(1, 2, 0, 4), absent(), absent()],
          resize_attrs((1, 2, 3, 8), "nearest", "asymmetric"),
          "resize: cannot resize dim 2 of size 0 to 3"),
]


def backward(name, g, input_size, mode, transform, torch_fn, scales=None, reduce_len=16,
             rounding="round_prefer_floor"):
    attrs = dict(resize_attrs(g.shape, mode, transform, rounding), input_size=list(input_size))
    return Case("resize_backward", [g, absent(), scales_input(scales)],
                lambda t, roi, s: torch_fn(t), attrs=attrs, name=name, reduce_len=reduce_len)


RESIZE_BACKWARD = [
    backward("nearest", randn(2, 3, 8, 10), (2, 3, 4, 5), "nearest", "asymmetric",
             lambda t: A.upsample_nearest2d_backward(t, [8, 10], [2, 3, 4, 5]), rounding="floor",
             reduce_len=4),
    backward("nearest_exact_down_transposed", randn(1, 2, 3, 4, layout="transposed"),
             (1, 2, 7, 9), "nearest", "half_pixel",
             lambda t: A._upsample_nearest_exact2d_backward(t, [3, 4], [1, 2, 7, 9]),
             rounding="round_prefer_ceil"),
    backward("linear_up", randn(2, 3, 8, 10), (2, 3, 4, 5), "linear", "half_pixel",
             lambda t: A.upsample_bilinear2d_backward(t, [8, 10], [2, 3, 4, 5], False)),
    backward("linear_align_corners_f64", randn(1, 2, 4, 3, dtype="float64"), (1, 2, 9, 8),
             "linear", "align_corners",
             lambda t: A.upsample_bilinear2d_backward(t, [4, 3], [1, 2, 9, 8], True)),
    backward("linear_1d_scales", randn(2, 3, 7), (2, 3, 3), "linear", "half_pixel",
             lambda t: A.upsample_linear1d_backward(t, [7], [2, 3, 3], False, 2.5),
             scales=(1, 1, 2.5)),
    backward("cubic_up_strided", randn(1, 2, 7, 9, layout="strided"), (1, 2, 4, 5), "cubic",
             "half_pixel",
             lambda t: A.upsample_bicubic2d_backward(t, [7, 9], [1, 2, 4, 5], False),
             reduce_len=64),
    backward("cubic_align_corners_down_f64", randn(2, 1, 3, 2, dtype="float64"),
             (2, 1, 6, 7), "cubic", "align_corners",
             lambda t: A.upsample_bicubic2d_backward(t, [3, 2], [2, 1, 6, 7], True)),
    Case("resize_backward", [randn(1, 2, 5, 5), absent(), absent()],
         attrs=dict(resize_attrs((1, 2, 8, 8), "linear", "half_pixel"),
                    input_size=[1, 2, 4, 4]),
         name="wrong_grad_shape",
         error="resize_backward: expected grad_output of shape [1, 2, 8, 8] (resize's output), "
               "got [1, 2, 5, 5]"),
]

CASES = RESIZE + RESIZE_BACKWARD
