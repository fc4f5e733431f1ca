"""Rows for max_roi_pool and deformable convolution (deform_conv2d and its
sampling step deform_im2col with their backward ops).

PyTorch has neither op without torchvision, so the references below are
written with plain torch ops, independently of kiln's kernels:

- roi pooling (Caffe's, ONNX's MaxRoiPool): a loop over rois and bins,
  each bin's bounds computed in the input's precision as Caffe computes
  them, its maximum taken by torch.amax (empty bins give 0);
- deformable convolution (ONNX's DeformConv, torchvision's deform_conv2d):
  every kernel tap's sampling point gathered bilinearly from its four
  neighbours (zero outside the input) by advanced indexing, times the mask,
  and contracted with the weight by einsum per group.

Gradients come from torch autograd through these references."""
import dataclasses
import math

import numpy as np
import torch

from oracle import Case, absent, randn, uniform, values


def fixed(vals, dtype="float32"):
    """Values that take no gradient (rois: see ops/roi_pool_ops.cpp)."""
    return dataclasses.replace(values(vals, dtype), requires_grad=False)


# ---- max_roi_pool ----

def round_half_away(v: float) -> int:
    """C's round(), as Caffe and ONNX Runtime round roi coordinates."""
    whole = math.floor(abs(v))
    return int(math.copysign(whole + (1 if abs(v) - whole >= 0.5 else 0), v))


def roi_pool_ref(x, rois, pooled, scale):
    real = np.float32 if x.dtype == torch.float32 else np.float64
    _, channels, height, width = x.shape
    pooled_h, pooled_w = pooled
    out = []
    for roi in rois.detach().numpy():
        batch = int(roi[0])
        start_w, start_h, end_w, end_h = (round_half_away(float(real(roi[k]) * real(scale)))
                                          for k in (1, 2, 3, 4))
        bin_h = real(max(end_h - start_h + 1, 1)) / real(pooled_h)
        bin_w = real(max(end_w - start_w + 1, 1)) / real(pooled_w)

        def span(i, size, start, limit):
            lo = int(np.floor(real(i) * size)) + start
            hi = int(np.ceil(real(i + 1) * size)) + start
            return min(max(lo, 0), limit), min(max(hi, 0), limit)

        rows = []
        for i in range(pooled_h):
            h0, h1 = span(i, bin_h, start_h, height)
            row = []
            for j in range(pooled_w):
                w0, w1 = span(j, bin_w, start_w, width)
                if h1 <= h0 or w1 <= w0:
                    row.append(x.new_zeros(channels))
                else:
                    row.append(torch.amax(x[batch, :, h0:h1, w0:w1], dim=(1, 2)))
            rows.append(torch.stack(row, -1))
        out.append(torch.stack(rows, -2))
    return torch.stack(out)


def roi_case(x, rois, pooled, scale=1.0, name=""):
    return Case("max_roi_pool", [x, rois], lambda a, r: roi_pool_ref(a, r, pooled, scale),
                attrs={"pooled_shape": list(pooled), "spatial_scale": scale}, name=name)


def roi_backward_case(x, rois, pooled, scale=1.0, name=""):
    def fn(grad, a, r):
        a = a.detach().clone().requires_grad_(True)
        return torch.autograd.grad(roi_pool_ref(a, r, pooled, scale), a, grad)[0]
    out_shape = (len(rois.values), x.shape[1], *pooled)
    return Case("max_roi_pool_backward", [randn(*out_shape, dtype=x.dtype), x, rois], fn,
                attrs={"pooled_shape": list(pooled), "spatial_scale": scale}, name=name,
                grad=False)


# Whole-pixel rois, rois on .5 (rounded away from zero), one reaching past
# the input (clipped), one wholly outside (empty bins), a malformed one (end
# before start: one pixel), one on the second image.
ROIS = [[0, 0, 0, 5, 4], [1, 1.5, 0.5, 4.5, 3.5], [0, -2, -1, 2, 8], [1, 7, 7, 9, 9],
        [0, 3, 3, 1, 1], [1, 2, 1, 2, 1]]
SCALED_ROIS = [[0, 1, 3, 9, 7], [1, 0, 0, 3, 11], [0, -4, 2, 5, 15], [1, 5, 5, 5, 5]]

ROI_CASES = [
    roi_case(randn(2, 3, 6, 7), fixed(ROIS), (2, 2), name="mixed_rois"),
    roi_case(randn(2, 2, 6, 7), fixed(ROIS), (3, 4), name="bins_over_pixels"),
    roi_case(randn(2, 3, 8, 6), fixed(SCALED_ROIS), (2, 3), 0.5, name="half_scale"),
    roi_case(randn(2, 2, 5, 5, dtype="float64"), fixed(ROIS, "float64"), (2, 2), 0.75,
             name="f64_scale"),
    roi_case(randn(2, 3, 6, 7, layout="transposed"), fixed(ROIS), (1, 1), name="transposed"),
    roi_case(randn(1, 2, 3, 3), fixed([[0, 0, 0, 2, 2]]), (5, 4), name="more_bins_than_pixels"),
    roi_backward_case(randn(2, 3, 6, 7), fixed(ROIS), (2, 2), name="mixed_rois"),
    roi_backward_case(randn(2, 2, 8, 6, dtype="float64"), fixed(SCALED_ROIS, "float64"), (3, 2),
                      0.5, name="f64_half_scale"),
    Case("max_roi_pool", [randn(2, 3, 4, 4), fixed([[0, 0, 0, 1, 1, 1]])],
         attrs={"pooled_shape": [2, 2]}, name="rois_not_five",
         error="expected rois of shape [R, 5]"),
    Case("max_roi_pool", [randn(3, 4, 4), fixed([[0, 0, 0, 1, 1]])],
         attrs={"pooled_shape": [2, 2]}, name="three_d_input", error="expected a 4-D input"),
    Case("max_roi_pool", [randn(1, 3, 4, 4), fixed([[0, 0, 0, 1, 1]])],
         attrs={"pooled_shape": [2]}, name="one_pooled_size",
         error="pooled_shape must be two positive sizes"),
    Case("max_roi_pool", [randn(2, 3, 4, 4), fixed([[2, 0, 0, 1, 1]])],
         attrs={"pooled_shape": [2, 2]}, name="batch_index_out_of_range",
         error="names batch index 2, outside the input's 2 images"),
]


# ---- deformable convolution ----

def bilinear_zero(img, y, x):
    """img [C, H, W] sampled at points (y, x) of any shape S: [C, *S]."""
    height, width = img.shape[1:]
    inside = (y > -1) & (y < height) & (x > -1) & (x < width)
    y0, x0 = torch.floor(y), torch.floor(x)
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx

    def corner(yy, xx, weight):
        valid = inside & (yy >= 0) & (yy <= height - 1) & (xx >= 0) & (xx <= width - 1)
        picked = img[:, yy.clamp(0, height - 1).long(), xx.clamp(0, width - 1).long()]
        return torch.where(valid, weight, torch.zeros_like(weight)) * picked

    return (corner(y0, x0, hy * hx) + corner(y0, x0 + 1, hy * lx) + corner(y0 + 1, x0, ly * hx)
            + corner(y0 + 1, x0 + 1, ly * lx))


def im2col_ref(x, offset, mask, kernel, stride, padding, dilation, offset_groups):
    """[N, C * kh * kw, OH * OW], row c * kh * kw + tap."""
    batch, channels = x.shape[:2]
    out_h, out_w = offset.shape[2:]
    taps = kernel[0] * kernel[1]
    per_group = channels // offset_groups
    rows_h = torch.arange(out_h) * stride[0] - padding[0]
    cols_w = torch.arange(out_w) * stride[1] - padding[1]
    images = []
    for n in range(batch):
        groups = []
        for g in range(offset_groups):
            taps_of_group = []
            for k in range(taps):
                i, j = divmod(k, kernel[1])
                channel = (g * taps + k) * 2
                y = (rows_h + i * dilation[0])[:, None].to(x.dtype) + offset[n, channel]
                xs = (cols_w + j * dilation[1])[None, :].to(x.dtype) + offset[n, channel + 1]
                v = bilinear_zero(x[n, g * per_group:(g + 1) * per_group], y, xs)
                if mask is not None:
                    v = v * mask[n, g * taps + k]
                taps_of_group.append(v)  # [per_group, OH, OW]
            groups.append(torch.stack(taps_of_group, 1))  # [per_group, taps, OH, OW]
        images.append(torch.cat(groups, 0).reshape(channels * taps, out_h * out_w))
    return torch.stack(images)


def deform_conv_ref(x, weight, offset, bias, mask, stride, padding, dilation, groups,
                    offset_groups):
    out_channels, _, kh, kw = weight.shape
    batch = x.shape[0]
    out_h, out_w = offset.shape[2:]
    cols = im2col_ref(x, offset, mask, (kh, kw), stride, padding, dilation, offset_groups)
    cols = cols.reshape(batch, groups, -1, out_h * out_w)
    w = weight.reshape(groups, out_channels // groups, -1)
    out = torch.einsum("gmk,ngkl->ngml", w, cols).reshape(batch, out_channels, out_h, out_w)
    return out if bias is None else out + bias[None, :, None, None]


def conv_attrs(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, offset_groups=1):
    return {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
            "groups": groups, "offset_groups": offset_groups}


def out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def deform_case(x_shape, w_shape, name, spread=1.5, bias=False, mask=False, dtype="float32",
                layout="contiguous", **geometry):
    attrs = conv_attrs(**geometry)
    n, _, h, w = x_shape
    _, _, kh, kw = w_shape
    oh = out_size(h, kh, attrs["stride"][0], attrs["padding"][0], attrs["dilation"][0])
    ow = out_size(w, kw, attrs["stride"][1], attrs["padding"][1], attrs["dilation"][1])
    og = attrs["offset_groups"]
    inputs = [randn(*x_shape, dtype=dtype, layout=layout), randn(*w_shape, dtype=dtype),
              uniform(-spread, spread, n, 2 * og * kh * kw, oh, ow, dtype=dtype),
              randn(w_shape[0], dtype=dtype) if bias else absent(),
              uniform(0, 1, n, og * kh * kw, oh, ow, dtype=dtype) if mask else absent()]
    if not mask:
        inputs.pop()
        if not bias:
            inputs.pop()

    def fn(x, weight, offset, b=None, m=None):
        return deform_conv_ref(x, weight, offset, b, m, attrs["stride"], attrs["padding"],
                               attrs["dilation"], attrs["groups"], og)
    return Case("deform_conv2d", inputs, fn, attrs=attrs, name=name,
                reduce_len=w_shape[1] * kh * kw)


def sampling_attrs(kernel, **geometry):
    attrs = conv_attrs(**geometry)
    del attrs["groups"]
    return {"kernel_size": list(kernel), **attrs}


def im2col_case(x_shape, kernel, name, mask=False, backward=False, dtype="float32", **geometry):
    attrs = sampling_attrs(kernel, **geometry)
    n, c, h, w = x_shape
    oh = out_size(h, kernel[0], attrs["stride"][0], attrs["padding"][0], attrs["dilation"][0])
    ow = out_size(w, kernel[1], attrs["stride"][1], attrs["padding"][1], attrs["dilation"][1])
    og, taps = attrs["offset_groups"], kernel[0] * kernel[1]
    sampled = [randn(*x_shape, dtype=dtype), uniform(-2, 2, n, 2 * og * taps, oh, ow, dtype=dtype)]
    if mask:
        sampled.append(uniform(0, 1, n, og * taps, oh, ow, dtype=dtype))

    def columns(x, offset, m=None):
        return im2col_ref(x, offset, m, kernel, attrs["stride"], attrs["padding"],
                          attrs["dilation"], og)
    if not backward:
        return Case("deform_im2col", sampled, columns, attrs=attrs, name=name)

    def grads(grad_columns, x, offset, m=None):
        leaves = [t.detach().clone().requires_grad_(True) for t in (x, offset)]
        if m is not None:
            leaves.append(m.detach().clone().requires_grad_(True))
        got = torch.autograd.grad(columns(*leaves), leaves, grad_columns)
        return got if m is not None else (*got, torch.zeros(0, dtype=x.dtype))
    return Case("deform_im2col_backward", [randn(n, c * taps, oh * ow, dtype=dtype), *sampled],
                grads, attrs=attrs, name=name, grad=False)


DEFORM_CASES = [
    deform_case((2, 3, 6, 5), (4, 3, 3, 3), "basic"),
    deform_case((2, 4, 7, 7), (6, 2, 3, 3), "stride_pad_groups_bias_mask", bias=True, mask=True,
                stride=(2, 2), padding=(1, 1), groups=2, offset_groups=2),
    deform_case((1, 2, 8, 8), (3, 2, 2, 3), "dilation_far_offsets", spread=5.0,
                dilation=(2, 1), padding=(0, 1)),
    deform_case((2, 4, 5, 6), (3, 4, 3, 2), "f64_mask_no_bias", mask=True, dtype="float64",
                offset_groups=4, stride=(1, 2)),
    deform_case((2, 3, 5, 5), (5, 3, 1, 1), "one_by_one_bias", bias=True, spread=0.8),
    deform_case((2, 6, 6, 5), (6, 2, 3, 3), "transposed_groups_3", layout="transposed",
                groups=3, offset_groups=3, padding=(1, 1)),
    im2col_case((2, 3, 5, 4), (2, 2), "basic"),
    im2col_case((1, 4, 6, 6), (3, 3), "mask_groups_stride", mask=True, stride=(2, 1),
                padding=(1, 1), offset_groups=2),
    im2col_case((2, 3, 5, 4), (2, 2), "basic", backward=True),
    im2col_case((1, 4, 6, 6), (3, 3), "f64_mask_groups_dilation", mask=True, backward=True,
                dtype="float64", dilation=(1, 2), padding=(1, 2), offset_groups=2),
    Case("deform_conv2d", [randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(2, 16, 3, 3)],
         attrs=conv_attrs(), name="wrong_offset_channels",
         error="expected offset of shape [N, 2 * offset_groups * kh * kw, OH, OW] = [2, 18, 3, 3]"),
    Case("deform_conv2d", [randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(2, 18, 2, 3)],
         attrs=conv_attrs(), name="wrong_offset_size", error="expected offset of shape"),
    Case("deform_conv2d", [randn(2, 4, 5, 5), randn(4, 3, 3, 3), randn(2, 18, 3, 3)],
         attrs=conv_attrs(), name="channels_mismatch",
         error="expected input channels = weight.shape[1] * groups"),
    Case("deform_conv2d", [randn(1, 3, 5, 5), randn(4, 3, 3, 3), randn(1, 18, 3, 3), randn(3)],
         attrs=conv_attrs(), name="bad_bias", error="expected a bias of shape [4]"),
    Case("deform_conv2d", [randn(1, 3, 5, 5), randn(4, 3, 3, 3), randn(1, 18, 3, 3), absent(),
                           randn(1, 8, 3, 3)],
         attrs=conv_attrs(), name="bad_mask", error="expected mask of shape"),
    Case("deform_conv2d", [randn(1, 4, 5, 5), randn(4, 4, 3, 3), randn(1, 18, 3, 3)],
         attrs=conv_attrs(offset_groups=3), name="offset_groups_split",
         error="channels do not split into 3 offset groups"),
    Case("deform_conv2d", [randn(1, 3, 5, 5), randn(4, 3, 0, 3), randn(1, 0, 5, 3)],
         attrs=conv_attrs(), name="empty_kernel", error="expected a kernel of at least 1x1"),
    Case("deform_conv2d", [randn(1, 3, 2, 2), randn(4, 3, 3, 3), randn(1, 18, 1, 1)],
         attrs=conv_attrs(), name="input_smaller_than_kernel",
         error="is smaller than the dilated kernel"),
]

CASES = ROI_CASES + DEFORM_CASES
