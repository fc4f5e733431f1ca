"""Rows for conv_transpose2d, the 2-D upsampling ops, pad, and their backward
ops. The backward ops are PyTorch's aten ones where it has them; pad_backward
(F.pad's backward, which PyTorch has no op for in every mode) is
torch.autograd.grad of F.pad. Each backward op's gradient rule is its forward
op, so its rows check gradients too (torch differentiates its own backward
ops, and the autograd.grad below keeps its graph for that)."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, bools, ints, randn

A = torch.ops.aten


# ---- conv_transpose2d ----------------------------------------------------
# reduce_len is the number of products one output sums at most:
# C / groups * kh * kw.

def conv_t(stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1, dilation=(1, 1)):
    return lambda x, w, b=None: F.conv_transpose2d(x, w, b, stride, padding, output_padding,
                                                   groups, dilation)


def conv_t_attrs(stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1,
                 dilation=(1, 1)):
    return {"stride": list(stride), "padding": list(padding),
            "output_padding": list(output_padding), "groups": groups,
            "dilation": list(dilation)}


def conv_t_case(name, inputs, reduce_len, **geometry):
    return Case("conv_transpose2d", inputs, conv_t(**geometry), attrs=conv_t_attrs(**geometry),
                name=name, reduce_len=reduce_len)


CONV_T = [
    conv_t_case("bias", [randn(2, 4, 5, 6), randn(4, 3, 3, 3), randn(3)], 36),
    conv_t_case("stride2_pad1_output_padding1", [randn(1, 3, 4, 4), randn(3, 2, 3, 3),
                                                 randn(2)], 27,
                stride=(2, 2), padding=(1, 1), output_padding=(1, 1)),
    conv_t_case("no_bias_asymmetric", [randn(2, 2, 3, 5), randn(2, 3, 2, 3), absent()], 12,
                stride=(2, 3), padding=(0, 1), output_padding=(1, 2)),
    conv_t_case("groups2", [randn(2, 4, 4, 4), randn(4, 3, 3, 3), randn(6)], 18, groups=2),
    conv_t_case("depthwise_stride", [randn(1, 3, 4, 5), randn(3, 1, 3, 3), randn(3)], 9,
                stride=(2, 2), padding=(1, 0), groups=3),
    conv_t_case("dilation", [randn(1, 2, 5, 4), randn(2, 3, 3, 2), randn(3)], 12,
                padding=(1, 1), dilation=(2, 3)),
    # An output_padding of at least the stride (allowed below the dilation)
    # gives output rows and cols no input element reaches: bias only.
    conv_t_case("output_padding_beyond_stride", [randn(1, 2, 3, 3), randn(2, 3, 2, 2),
                                                 randn(3)], 8,
                output_padding=(1, 2), dilation=(2, 3)),
    conv_t_case("f64_output_padding_beyond_stride",
                [randn(2, 2, 3, 4, dtype="float64"), randn(2, 2, 3, 2, dtype="float64"),
                 randn(4, dtype="float64")], 12,
                stride=(2, 1), padding=(1, 0), output_padding=(2, 1), groups=2,
                dilation=(3, 2)),
    conv_t_case("unbatched", [randn(4, 5, 5), randn(4, 2, 3, 3), randn(2)], 36,
                stride=(2, 2), padding=(1, 1)),
    conv_t_case("f64_unbatched_no_bias", [randn(2, 3, 4, dtype="float64"),
                                          randn(2, 2, 2, 3, dtype="float64"), absent()], 12,
                stride=(3, 1), output_padding=(2, 0)),
    conv_t_case("f64_groups_stride_dilation", [randn(2, 4, 3, 4, dtype="float64"),
                                               randn(4, 2, 3, 2, dtype="float64"),
                                               randn(4, dtype="float64")], 12,
                stride=(2, 3), padding=(1, 1), output_padding=(1, 0), groups=2,
                dilation=(1, 2)),
    conv_t_case("non_contiguous", [randn(2, 3, 4, 5, layout="transposed"),
                                   randn(3, 2, 2, 3, layout="strided"),
                                   randn(2, layout="strided")], 18, stride=(2, 1)),
    conv_t_case("expanded", [randn(2, 2, 4, 4, layout="expanded"), randn(2, 3, 3, 3),
                             randn(3)], 18, padding=(1, 1)),
    conv_t_case("empty_batch", [randn(0, 3, 4, 4), randn(3, 2, 3, 3), randn(2)], 27,
                stride=(2, 2)),
    Case("conv_transpose2d", [randn(3, 5), randn(3, 2, 3, 3), absent()], name="input_2d",
         error="conv_transpose2d: expected 3-D (unbatched) or 4-D (batched) input, got shape "
               "[3, 5]"),
    Case("conv_transpose2d", [randn(1, 2, 4, 4), randn(2, 3, 3), absent()], name="weight_3d",
         error="conv_transpose2d: expected 4-D weight"),
    Case("conv_transpose2d", [randn(1, 3, 4, 4), randn(2, 3, 3, 3), absent()], name="channels",
         error="given transposed=1, weight of size [2, 3, 3, 3], expected input[1, 3, 4, 4] "
               "to have 2 channels, but got 3 channels instead"),
    Case("conv_transpose2d", [randn(1, 3, 4, 4), randn(3, 3, 3, 3), absent()],
         attrs={"groups": 2}, name="groups_divide",
         error="given groups=2, expected weight to be divisible by 2 at dimension 0"),
    Case("conv_transpose2d", [randn(1, 4, 4, 4), randn(4, 3, 3, 3), randn(7)],
         attrs={"groups": 2}, name="bad_bias",
         error="expected bias to be 1-dimensional with 6 elements, but got bias of size [7]"),
    Case("conv_transpose2d", [randn(1, 2, 4, 4), randn(2, 3, 3, 3), absent()],
         attrs=conv_t_attrs(stride=(2, 2), output_padding=(2, 2)), name="output_padding_big",
         error="output padding must be smaller than either stride or dilation, but got "
               "output_padding_height: 2 output_padding_width: 2 stride_height: 2 "
               "stride_width: 2 dilation_height: 1 dilation_width: 1"),
    Case("conv_transpose2d", [randn(1, 1, 1, 1), randn(1, 1, 1, 1), absent()],
         attrs=conv_t_attrs(padding=(1, 1)), name="output_too_small",
         error="given input size per channel: (1 x 1). Calculated output size per channel: "
               "(-1 x -1). Output size is too small"),
    Case("conv_transpose2d", [ints(0, 3, 1, 1, 2, 2), ints(0, 3, 1, 1, 1, 1), absent()],
         name="int", error="conv_transpose2d: expected floating inputs, got int64"),
]


# ---- upsample_nearest2d, upsample_bilinear2d -----------------------------

def scale_attrs(size, scales):
    attrs = {"output_size": list(size)}
    if scales is not None:
        attrs.update(scales_h=scales[0], scales_w=scales[1])
    return attrs


def nearest(name, x, size, scales=None, exact=False, reduce_len=1):
    fn = A._upsample_nearest_exact2d if exact else A.upsample_nearest2d
    sh, sw = scales or (None, None)
    attrs = dict(scale_attrs(size, scales), exact=exact)
    return Case("upsample_nearest2d", [x], lambda t: fn(t, list(size), sh, sw), attrs=attrs,
                name=name, reduce_len=reduce_len)


def bilinear(name, x, size, align_corners=False, scales=None, reduce_len=4):
    sh, sw = scales or (None, None)
    attrs = dict(scale_attrs(size, scales), align_corners=align_corners)
    return Case("upsample_bilinear2d", [x],
                lambda t: A.upsample_bilinear2d(t, list(size), align_corners, sh, sw),
                attrs=attrs, name=name, reduce_len=reduce_len)


# reduce_len of the forward rows is for their gradients, which sum an output
# gradient over every output an input element reaches.
NEAREST = [
    nearest("double", randn(2, 3, 4, 5), (8, 10), reduce_len=4),
    nearest("scale_2_5", randn(1, 2, 3, 4), (7, 10), (2.5, 2.5), reduce_len=9),
    nearest("non_integer_up", randn(1, 2, 3, 4), (5, 9), reduce_len=9),
    nearest("downscale", randn(2, 2, 7, 9), (3, 4)),
    nearest("downscale_scales", randn(1, 2, 8, 9), (4, 3), (0.5, 0.34)),
    nearest("to_one", randn(2, 3, 4, 5), (1, 1)),
    nearest("transposed", randn(2, 3, 4, 3, layout="transposed"), (6, 7), reduce_len=9),
    nearest("f64_strided", randn(1, 2, 5, 3, dtype="float64", layout="strided"), (3, 7),
            reduce_len=9),
    nearest("empty_batch", randn(0, 3, 2, 2), (4, 4)),
    nearest("exact_up", randn(2, 3, 3, 4), (7, 9), exact=True, reduce_len=9),
    nearest("exact_double", randn(1, 2, 3, 4), (6, 8), exact=True, reduce_len=4),
    nearest("exact_scales", randn(1, 2, 4, 3), (6, 6), (1.7, 2.3), exact=True, reduce_len=9),
    nearest("f64_exact_down", randn(1, 3, 9, 7, dtype="float64", layout="expanded"), (4, 3),
            exact=True),
    Case("upsample_nearest2d", [randn(3, 4, 4)], attrs={"output_size": [8, 8]}, name="input_3d",
         error="upsample_nearest2d: expected a 4-D input [N, C, H, W], got shape [3, 4, 4]"),
    Case("upsample_nearest2d", [randn(1, 2, 4, 4)], attrs={"output_size": [8]},
         name="output_size_1", error="upsample_nearest2d: output_size must hold 2 sizes"),
    Case("upsample_nearest2d", [randn(1, 2, 4, 4)], attrs={"output_size": [0, 8]},
         name="zero_output",
         error="input and output sizes should be greater than 0, but got input (H: 4, W: 4) "
               "output (H: 0, W: 8)"),
    Case("upsample_nearest2d", [randn(2, 0, 3, 4)], attrs={"output_size": [3, 8]},
         name="empty_channels",
         error="non-empty 4D data tensor expected but got a tensor with sizes [2, 0, 3, 4]"),
    Case("upsample_nearest2d", [ints(0, 5, 1, 1, 3, 4)], attrs={"output_size": [6, 8]},
         name="int", error="upsample_nearest2d: expected a floating input, got int64"),
]

BILINEAR = [
    bilinear("up", randn(2, 3, 4, 5), (8, 10), reduce_len=16),
    bilinear("align_corners_up", randn(1, 2, 3, 4), (7, 9), True, reduce_len=16),
    bilinear("down", randn(1, 2, 9, 8), (4, 3)),
    bilinear("align_corners_down", randn(1, 2, 9, 8), (4, 3), True),
    bilinear("scales", randn(1, 2, 3, 5), (5, 8), scales=(1.7, 1.7), reduce_len=16),
    bilinear("scales_down", randn(1, 2, 8, 9), (3, 4), scales=(0.4, 0.5)),
    # A size the scale keeps (floor(2 * 1.2) = 2) is copied, as in PyTorch.
    bilinear("scale_keeps_a_size", randn(1, 2, 4, 2), (6, 2), scales=(1.5, 1.2),
             reduce_len=16),
    bilinear("align_corners_scales_ignored", randn(1, 2, 3, 4), (6, 7), True, (2.0, 1.75),
             reduce_len=16),
    bilinear("to_one", randn(2, 2, 4, 5), (1, 1)),
    bilinear("align_corners_to_one", randn(2, 2, 4, 5), (1, 1), True),
    bilinear("from_one", randn(1, 2, 1, 1), (3, 4), reduce_len=12),
    bilinear("transposed", randn(2, 3, 4, 3, layout="transposed"), (5, 7), reduce_len=16),
    bilinear("expanded", randn(2, 2, 3, 3, layout="expanded"), (4, 5), True, reduce_len=16),
    bilinear("f64", randn(1, 3, 5, 4, dtype="float64"), (9, 3), reduce_len=16),
    bilinear("f64_align_corners_strided", randn(2, 2, 4, 6, dtype="float64", layout="strided"),
             (7, 4), True, reduce_len=16),
    bilinear("empty_batch", randn(0, 3, 2, 2), (4, 4)),
    Case("upsample_bilinear2d", [randn(1, 2, 0, 4)], attrs={"output_size": [3, 8]},
         name="empty_input",
         error="upsample_bilinear2d: input and output sizes should be greater than 0, but got "
               "input (H: 0, W: 4) output (H: 3, W: 8)"),
    Case("upsample_bilinear2d", [randn(1, 4, 4)], attrs={"output_size": [8, 8]},
         name="input_3d", error="upsample_bilinear2d: expected a 4-D input"),
    Case("upsample_bilinear2d", [ints(0, 5, 1, 1, 3, 4)], attrs={"output_size": [6, 8]},
         name="int", error="upsample_bilinear2d: expected a floating input, got int64"),
]


def nearest_backward(name, g, input_size, size, scales=None, exact=False, reduce_len=1):
    fn = A._upsample_nearest_exact2d_backward if exact else A.upsample_nearest2d_backward
    sh, sw = scales or (None, None)
    attrs = dict(scale_attrs(size, scales), exact=exact, input_size=list(input_size))
    return Case("upsample_nearest2d_backward", [g],
                lambda t: fn(t, list(size), list(input_size), sh, sw), attrs=attrs, name=name,
                reduce_len=reduce_len)


def bilinear_backward(name, g, input_size, size, align_corners=False, scales=None,
                      reduce_len=16):
    sh, sw = scales or (None, None)
    attrs = dict(scale_attrs(size, scales), align_corners=align_corners,
                 input_size=list(input_size))
    return Case("upsample_bilinear2d_backward", [g],
                lambda t: A.upsample_bilinear2d_backward(t, list(size), list(input_size),
                                                         align_corners, sh, sw),
                attrs=attrs, name=name, reduce_len=reduce_len)


UPSAMPLE_BACKWARD = [
    nearest_backward("double", randn(2, 3, 8, 10), (2, 3, 4, 5), (8, 10), reduce_len=4),
    nearest_backward("scales", randn(1, 2, 7, 10), (1, 2, 3, 4), (7, 10), (2.5, 2.5),
                     reduce_len=9),
    nearest_backward("downscale_transposed", randn(1, 2, 3, 4, layout="transposed"),
                     (1, 2, 7, 9), (3, 4)),
    nearest_backward("exact", randn(2, 2, 7, 9), (2, 2, 3, 4), (7, 9), exact=True, reduce_len=9),
    nearest_backward("f64_exact_scales_strided",
                     randn(1, 2, 6, 6, dtype="float64", layout="strided"), (1, 2, 4, 3), (6, 6),
                     (1.7, 2.3), exact=True, reduce_len=9),
    nearest_backward("empty_batch", randn(0, 3, 4, 4), (0, 3, 2, 2), (4, 4)),
    Case("upsample_nearest2d_backward", [randn(1, 2, 5, 5)],
         attrs={"output_size": [8, 8], "input_size": [1, 2, 4, 4]}, name="wrong_grad_shape",
         error="upsample_nearest2d_backward: expected grad_output of shape [1, 2, 8, 8] "
               "(upsample_nearest2d's output), got [1, 2, 5, 5]"),
    bilinear_backward("up", randn(2, 3, 8, 10), (2, 3, 4, 5), (8, 10)),
    bilinear_backward("align_corners_down", randn(1, 2, 4, 3), (1, 2, 9, 8), (4, 3), True),
    bilinear_backward("scale_keeps_a_size", randn(1, 2, 6, 2), (1, 2, 4, 2), (6, 2),
                      scales=(1.5, 1.2)),
    bilinear_backward("f64_strided", randn(1, 3, 9, 3, dtype="float64", layout="strided"),
                      (1, 3, 5, 4), (9, 3)),
    bilinear_backward("f64_align_corners_transposed",
                      randn(2, 2, 7, 4, dtype="float64", layout="transposed"), (2, 2, 4, 6),
                      (7, 4), True),
    Case("upsample_bilinear2d_backward", [randn(1, 2, 5, 5)],
         attrs={"output_size": [5, 5], "input_size": [1, 2, 4]}, name="input_size_3d",
         error="upsample_bilinear2d: expected a 4-D input [N, C, H, W], got shape [1, 2, 4]"),
]


# ---- pad, pad_backward ---------------------------------------------------

def pad(name, x, widths, mode="constant", value=None, reduce_len=1):
    attrs = {"pad": list(widths), "mode": mode}
    if value is not None:
        attrs["value"] = value
    return Case("pad", [x], lambda t: F.pad(t, list(widths), mode, value), attrs=attrs,
                name=name, reduce_len=reduce_len)


def pad_error(name, x, widths, mode, error, value=None):
    attrs = {"pad": list(widths), "mode": mode}
    if value is not None:
        attrs["value"] = value
    return Case("pad", [x], attrs=attrs, name=name, error=error)


PAD = [
    pad("constant_1d", randn(2, 3, 5), (1, 2)),
    pad("constant_value_2d", randn(2, 3, 4, 5), (1, 0, 2, 1), value=1.5),
    pad("constant_value_3d", randn(1, 2, 3, 4, 5), (1, 1, 0, 2, 2, 0), value=-0.5),
    pad("constant_crop", randn(2, 3, 6, 5), (-1, 2, -2, -1)),
    pad("constant_crop_to_empty", randn(2, 3, 4), (-2, -2)),
    pad("constant_every_dim", randn(3, 4), (1, 1, 2, 0), value=2.0),
    pad("constant_int", ints(-5, 5, 2, 3), (2, 1), value=7.0),
    pad("constant_bool", bools(2, 3, 2), (0, 1, 1, 0), value=1.0),
    pad("constant_f64_transposed", randn(2, 3, 4, 5, dtype="float64", layout="transposed"),
        (1, 2, 3, 0), value=0.25),
    pad("constant_expanded", randn(3, 2, 4, layout="expanded"), (2, 0, 0, 1)),
    pad("constant_empty", randn(0, 3, 4), (1, 1)),
    pad("reflect_1d", randn(2, 3, 6), (2, 3), "reflect", reduce_len=3),
    pad("reflect_1d_unbatched", randn(3, 6), (1, 2), "reflect", reduce_len=3),
    pad("reflect_2d", randn(2, 3, 5, 6), (1, 2, 3, 1), "reflect", reduce_len=9),
    pad("reflect_2d_unbatched_strided", randn(3, 5, 6, layout="strided"), (2, 2, 1, 1),
        "reflect", reduce_len=9),
    pad("reflect_3d", randn(1, 2, 4, 5, 6), (1, 2, 2, 1, 3, 0), "reflect", reduce_len=27),
    pad("reflect_3d_unbatched", randn(2, 4, 4, 5), (1, 1, 1, 1, 1, 1), "reflect",
        reduce_len=27),
    pad("reflect_crop_one_side", randn(2, 3, 6), (-1, 3), "reflect", reduce_len=3),
    pad("reflect_f64_transposed", randn(2, 3, 4, 5, dtype="float64", layout="transposed"),
        (3, 2, 1, 2), "reflect", reduce_len=9),
    pad("reflect_empty_batch", randn(0, 3, 5), (2, 2), "reflect"),
    pad("replicate_1d", randn(2, 3, 4), (3, 1), "replicate", reduce_len=4),
    pad("replicate_2d", randn(2, 3, 3, 4), (2, 2, 0, 3), "replicate", reduce_len=16),
    pad("replicate_2d_unbatched_expanded", randn(3, 4, 5, layout="expanded"), (1, 0, 2, 2),
        "replicate", reduce_len=9),
    pad("replicate_3d", randn(1, 2, 3, 3, 4), (1, 1, 2, 0, 0, 2), "replicate", reduce_len=27),
    pad("replicate_3d_unbatched", randn(2, 3, 2, 3), (2, 1, 1, 1, 1, 0), "replicate",
        reduce_len=27),
    pad("replicate_crop", randn(2, 3, 5, 6), (-2, 1, 2, -1), "replicate", reduce_len=4),
    pad("replicate_f64_strided", randn(2, 2, 4, 5, dtype="float64", layout="strided"),
        (3, 1, 1, 2), "replicate", reduce_len=16),
    pad("replicate_int", ints(-9, 9, 2, 3, 4), (1, 2), "replicate"),
    pad("circular_1d", randn(2, 3, 5), (2, 3), "circular", reduce_len=2),
    pad("circular_1d_unbatched", randn(3, 4), (4, 1), "circular", reduce_len=3),
    pad("circular_2d", randn(2, 3, 4, 5), (1, 2, 3, 1), "circular", reduce_len=4),
    pad("circular_3d", randn(1, 2, 3, 4, 5), (1, 1, 2, 0, 0, 3), "circular", reduce_len=8),
    pad("circular_3d_unbatched_transposed", randn(2, 3, 3, 4, layout="transposed"),
        (1, 0, 1, 2, 2, 1), "circular", reduce_len=8),
    pad("circular_crop", randn(2, 3, 6, 5), (-1, -2, 0, -1), "circular"),
    pad("circular_f64", randn(2, 2, 3, 4, dtype="float64"), (2, 1, 1, 1), "circular",
        reduce_len=4),
    pad("circular_empty_batch", randn(0, 2, 3), (1, 1), "circular"),
    pad_error("reflect_needs_batch_dim", randn(5), (1, 1), "reflect",
              "padding size 2 is not supported for 1D input tensor"),
    pad_error("replicate_6d", randn(1, 1, 1, 2, 3, 4), (1, 1, 1, 1), "replicate",
              "padding size 4 is not supported for 6D input tensor"),
    pad_error("circular_2d_pad_of_2d", randn(3, 4), (1, 1, 1, 1), "circular",
              "padding size 4 is not supported for 2D input tensor"),
    pad_error("reflect_too_big", randn(2, 3, 4), (4, 1), "reflect",
              "padding size should be less than the corresponding input dimension, but got: "
              "padding (4, 1) at dimension 2 of input [2, 3, 4]"),
    pad_error("reflect_empty_channels", randn(2, 0, 4), (1, 1), "reflect",
              "expected 2D or 3D (batch mode) tensor with possibly 0 batch size and other "
              "non-zero dimensions for input, but got: [2, 0, 4]"),
    pad_error("replicate_empty_width", randn(2, 3, 3, 0), (1, 1, 1, 1), "replicate",
              "expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
              "non-zero dimensions for input, but got: [2, 3, 3, 0]"),
    pad_error("circular_wraps_twice", randn(2, 3, 4), (5, 1), "circular",
              "padding value causes wrapping around more than once"),
    pad_error("odd_length", randn(2, 3, 4), (1,), "constant",
              "padding length must be divisible by 2"),
    pad_error("too_long", randn(2, 3, 4), (1,) * 8, "constant",
              "padding length should be less than or equal to two times the input dimension "
              "but got padding length 8 and input of dimension 3"),
    pad_error("negative_size", randn(2, 3, 4), (-3, -2), "constant",
              "the input size 4, plus negative padding -3 and -2 resulted in a negative output "
              "size"),
    pad_error("reflect_with_value", randn(2, 3, 4), (1, 1), "reflect",
              'padding mode "reflect" doesn\'t take in value argument', value=2.0),
    pad_error("unknown_mode", randn(2, 3, 4), (1, 1), "wrap",
              "unrecognised padding mode wrap"),
]


def pad_backward_fn(input_size, widths, mode):
    """F.pad's gradient at an input of input_size, as a function of the
    output gradient (differentiable again: create_graph)."""
    def run(g):
        x = torch.zeros(input_size, dtype=g.dtype, requires_grad=True)
        y = F.pad(x, list(widths), mode)
        return torch.autograd.grad(y, x, g, create_graph=True)[0]
    return run


def pad_backward(name, g, input_size, widths, mode="constant", reduce_len=1):
    attrs = {"input_size": list(input_size), "pad": list(widths), "mode": mode}
    return Case("pad_backward", [g], pad_backward_fn(input_size, widths, mode), attrs=attrs,
                name=name, reduce_len=reduce_len)


PAD_BACKWARD = [
    pad_backward("constant_crop", randn(2, 3, 5, 6), (2, 3, 5, 5), (-1, 2, 1, -1)),
    pad_backward("reflect_2d", randn(2, 3, 9, 8), (2, 3, 5, 6), (1, 1, 3, 1), "reflect",
                 reduce_len=9),
    pad_backward("reflect_1d_unbatched_transposed", randn(3, 9, layout="transposed"), (3, 6),
                 (1, 2), "reflect", reduce_len=3),
    pad_backward("replicate_3d", randn(1, 2, 5, 5, 6), (1, 2, 3, 3, 4),
                 (1, 1, 2, 0, 0, 2), "replicate", reduce_len=27),
    pad_backward("replicate_crop_strided", randn(2, 3, 6, 5, layout="strided"), (2, 3, 5, 6),
                 (-2, 1, 2, -1), "replicate", reduce_len=4),
    pad_backward("circular_2d", randn(2, 3, 8, 8), (2, 3, 4, 5), (1, 2, 3, 1), "circular",
                 reduce_len=4),
    pad_backward("f64_circular_crop", randn(2, 3, 5, 2, dtype="float64"), (2, 3, 6, 5),
                 (-1, -2, 0, -1), "circular"),
    pad_backward("f64_reflect_3d_unbatched",
                 randn(2, 6, 6, 7, dtype="float64", layout="strided"), (2, 4, 4, 5),
                 (1, 1, 1, 1, 1, 1), "reflect", reduce_len=27),
    pad_backward("empty_batch", randn(0, 3, 6), (0, 3, 4), (1, 1), "replicate"),
    Case("pad_backward", [randn(2, 3, 5)],
         attrs={"input_size": [2, 3, 4], "pad": [1, 2], "mode": "constant"},
         name="wrong_grad_shape",
         error="pad_backward: expected grad_output of shape [2, 3, 7] (pad's output), got "
               "[2, 3, 5]"),
    Case("pad_backward", [ints(0, 3, 2, 3, 6)],
         attrs={"input_size": [2, 3, 4], "pad": [1, 1], "mode": "constant"}, name="int",
         error="pad_backward: expected a floating input, got int64"),
]

CASES = CONV_T + NEAREST + BILINEAR + UPSAMPLE_BACKWARD + PAD + PAD_BACKWARD
