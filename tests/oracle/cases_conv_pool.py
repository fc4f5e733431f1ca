"""Rows for conv2d and the 2-D pooling ops, and for their backward ops (the
ops their gradient rules call). For conv, reduce_len is the dot-product
length C/groups * kh * kw."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, ints, randn, values


def conv(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return lambda x, w, b=None: F.conv2d(x, w, b, stride, padding, dilation, groups)


CONV = [
    Case("conv2d", [randn(2, 1, 28, 28), randn(6, 1, 5, 5), randn(6)], conv(padding=(2, 2)),
         attrs={"padding": [2, 2]}, name="lenet1", reduce_len=25),
    Case("conv2d", [randn(2, 6, 14, 14), randn(16, 6, 5, 5), randn(16)], conv(),
         name="lenet2", reduce_len=150),
    Case("conv2d", [randn(1, 3, 9, 9), randn(4, 3, 3, 3), randn(4)],
         conv(stride=(2, 2), padding=(1, 1)), attrs={"stride": [2, 2], "padding": [1, 1]},
         name="stride2_pad1", reduce_len=27),
    Case("conv2d", [randn(1, 2, 10, 9), randn(3, 2, 3, 3), absent()],
         conv(dilation=(2, 3)), attrs={"dilation": [2, 3]}, name="dilation_no_bias",
         reduce_len=18),
    Case("conv2d", [randn(2, 4, 7, 7), randn(6, 2, 3, 3), randn(6)], conv(groups=2),
         attrs={"groups": 2}, name="groups2", reduce_len=18),
    Case("conv2d", [randn(1, 4, 6, 6), randn(4, 1, 3, 3), randn(4)],
         conv(padding=(1, 1), groups=4), attrs={"padding": [1, 1], "groups": 4},
         name="depthwise", reduce_len=9),
    # 1x1 over a 1x1 image at batch 1: a matrix-vector product
    # (conv_matvec.cpp), with and without bias, an input whose channels are
    # strided.
    Case("conv2d", [randn(1, 40, 1, 1), randn(24, 40, 1, 1), randn(24)], conv(),
         name="1x1_image_matvec", reduce_len=40),
    Case("conv2d", [randn(1, 12, 1, 1, layout="transposed"), randn(5, 12, 1, 1), absent()],
         conv(), name="1x1_image_matvec_strided_no_bias", reduce_len=12),
    Case("conv2d", [randn(2, 3, 6, 5, layout="transposed"), randn(4, 3, 3, 2, layout="strided"),
                    randn(4, layout="strided")], conv(), name="non_contiguous", reduce_len=18),
    Case("conv2d", [randn(2, 3, 6, 5, layout="expanded"), randn(2, 3, 3, 1), randn(2)],
         conv(stride=(2, 1), padding=(1, 0)), attrs={"stride": [2, 1], "padding": [1, 0]},
         name="expanded_asymmetric", reduce_len=9),
    Case("conv2d", [randn(3, 8, 8), randn(2, 3, 3, 3), randn(2)], conv(stride=(2, 2)),
         attrs={"stride": [2]}, name="unbatched_single_stride", reduce_len=27),
    # One input channel, long kernels, a hop: an STFT as a convolution, which
    # runs as a GEMM over the overlapping frames (conv_frames.cpp); as a row,
    # as a column (1-D convolutions written either way), and as the loop
    # where the row is not contiguous.
    Case("conv2d", [randn(2, 1, 1, 300), randn(12, 1, 1, 64), randn(12)], conv(stride=(1, 24)),
         attrs={"stride": [1, 24]}, name="stft_frames", reduce_len=64),
    Case("conv2d", [randn(1, 1, 200, 1), randn(9, 1, 40, 1), absent()], conv(stride=(17, 1)),
         attrs={"stride": [17, 1]}, name="stft_frames_column", reduce_len=40),
    Case("conv2d", [randn(1, 1, 1, 90, layout="strided"), randn(8, 1, 1, 33), randn(8)],
         conv(stride=(1, 50)), attrs={"stride": [1, 50]}, name="stft_frames_strided",
         reduce_len=33),
    # Few output pixels, more than 16 filters: a GEMM over copied patches.
    Case("conv2d", [randn(1, 20, 1, 4), randn(24, 20, 1, 3), randn(24)],
         conv(padding=(0, 1)), attrs={"padding": [0, 1]}, name="few_pixels_1d", reduce_len=60),
    Case("conv2d", [randn(2, 3, 3, 3, layout="transposed"), randn(18, 3, 3, 3), absent()],
         conv(stride=(2, 2), padding=(1, 1), dilation=(1, 2)),
         attrs={"stride": [2, 2], "padding": [1, 1], "dilation": [1, 2]},
         name="few_pixels_2d", reduce_len=27),
    Case("conv2d", [randn(0, 3, 5, 5), randn(2, 3, 3, 3), randn(2)], conv(), name="empty_batch"),
    Case("conv2d", [randn(2, 3, 7, 6, dtype="float64"), randn(4, 3, 3, 3, dtype="float64"),
                    randn(4, dtype="float64")], conv(padding=(1, 1), dilation=(2, 1)),
         attrs={"padding": [1, 1], "dilation": [2, 1]}, name="f64", reduce_len=27),
    Case("conv2d", [randn(1, 4, 6, 6, dtype="float64", layout="transposed"),
                    randn(6, 2, 3, 3, dtype="float64"), absent()], conv(stride=(2, 2), groups=2),
         attrs={"stride": [2, 2], "groups": 2}, name="f64_groups_transposed", reduce_len=18),
    Case("conv2d", [randn(3, 28), randn(6, 1, 5, 5), absent()], name="input_2d",
         error="conv2d: expected 3-D (unbatched) or 4-D (batched) input, got shape [3, 28]"),
    Case("conv2d", [randn(1, 1, 28, 28), randn(6, 2, 5, 5), absent()], name="channels",
         error="expected input[1, 1, 28, 28] to have 2 channels, but got 1 channels instead"),
    Case("conv2d", [randn(1, 4, 8, 8), randn(6, 2, 3, 3), absent()], attrs={"groups": 4},
         name="groups_divide", error="given groups=4, expected weight to be divisible by 4"),
    Case("conv2d", [randn(1, 1, 3, 3), randn(1, 1, 5, 5), absent()], name="kernel_too_big",
         error="Kernel size: (5 x 5). Kernel size can't be greater than actual input size"),
    Case("conv2d", [randn(1, 2, 5, 5), randn(3, 2, 3, 3), randn(4)], name="bad_bias",
         error="expected bias to be 1-dimensional with 3 elements"),
    Case("conv2d", [ints(0, 3, 1, 1, 4, 4), ints(0, 3, 1, 1, 2, 2), absent()], name="int",
         error="conv2d: expected floating inputs, got int64"),
]


def max_pool(k, s=None, p=0, d=1, ceil=False):
    return lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil)


def avg_pool(k, s=None, p=0, ceil=False, include=True):
    return lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=include)


MAX_POOL = [
    Case("max_pool2d", [randn(2, 3, 4, 4)], max_pool(2), attrs={"kernel_size": [2, 2]},
         name="k2"),
    Case("max_pool2d", [randn(1, 2, 7, 7)], max_pool(3, 2, 1),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1]}, name="k3_s2_p1"),
    Case("max_pool2d", [randn(1, 2, 9, 8)], max_pool(2, 1, 0, 2),
         attrs={"kernel_size": [2, 2], "stride": [1, 1], "dilation": [2, 2]}, name="dilation"),
    Case("max_pool2d", [randn(1, 2, 7, 6)], max_pool(2, 2, 0, 1, True),
         attrs={"kernel_size": [2, 2], "ceil_mode": True}, name="ceil_mode"),
    Case("max_pool2d", [randn(1, 1, 6, 6)], max_pool((3, 2), (2, 3), (1, 1), 1, True),
         attrs={"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "ceil_mode": True},
         name="ceil_mode_padded_asymmetric"),
    Case("max_pool2d", [randn(2, 3, 6, 5, layout="transposed")], max_pool(2, 1),
         attrs={"kernel_size": [2, 2], "stride": [1, 1]}, name="transposed"),
    Case("max_pool2d", [randn(3, 6, 6)], max_pool(2), attrs={"kernel_size": [2, 2]},
         name="unbatched"),
    Case("max_pool2d", [randn(0, 3, 4, 4)], max_pool(2), attrs={"kernel_size": [2, 2]},
         name="empty_batch"),
    Case("max_pool2d", [randn(1, 2, 7, 7, dtype="float64", layout="strided")],
         max_pool(3, 2, 1, 2, True),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
                "dilation": [2, 2], "ceil_mode": True}, name="f64"),
    Case("max_pool2d", [ints(-50, 50, 1, 2, 5, 5)], max_pool(2, 2, 1),
         attrs={"kernel_size": [2, 2], "stride": [2, 2], "padding": [1, 1]}, name="i64"),
    Case("max_pool2d", [randn(1, 1, 4, 4)], attrs={"kernel_size": [2, 2], "padding": [2, 2]},
         name="pad_too_big",
         error="pad should be at most half of effective kernel size, but got pad=2, "
               "kernel_size=2 and dilation=1"),
    Case("max_pool2d", [randn(1, 3, 2, 2)], attrs={"kernel_size": [3, 3]}, name="too_small",
         error="Output size is too small"),
    Case("max_pool2d", [randn(4, 4)], attrs={"kernel_size": [2, 2]}, name="input_2d",
         error="max_pool2d: expected 3-D (unbatched) or 4-D (batched) input"),
]

def max_pool_indices(k, s=None, p=0, d=1, ceil=False):
    return lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)


# Indices count ih * W + iw within each (n, c) plane; ties keep the first.
MAX_POOL_INDICES = [
    Case("max_pool2d_with_indices", [randn(2, 3, 6, 5)], max_pool_indices(2),
         attrs={"kernel_size": [2, 2]}, name="k2"),
    Case("max_pool2d_with_indices", [randn(1, 2, 7, 6, dtype="float64", layout="transposed")],
         max_pool_indices((3, 2), (2, 1), (1, 1), (1, 2), True),
         attrs={"kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 1], "dilation": [1, 2],
                "ceil_mode": True}, name="f64_ceil_dilation_transposed"),
    Case("max_pool2d_with_indices", [values([[[1.0, 1.0, 0.0], [1.0, 0.5, 2.0], [2.0, 2.0, 2.0]]])],
         max_pool_indices(2, 1), attrs={"kernel_size": [2, 2], "stride": [1, 1]},
         name="ties_unbatched", fd=False),
    Case("max_pool2d_with_indices", [randn(1, 1, 4, 4)],
         attrs={"kernel_size": [2, 2], "padding": [2, 2]}, name="pad_too_big",
         error="pad should be at most half of effective kernel size"),
]

AVG_POOL = [
    Case("avg_pool2d", [randn(2, 6, 28, 28)], avg_pool(2, 2),
         attrs={"kernel_size": [2, 2], "stride": [2, 2]}, name="lenet", reduce_len=4),
    Case("avg_pool2d", [randn(1, 2, 7, 7)], avg_pool(3, 2, 1),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
         name="include_pad", reduce_len=9),
    Case("avg_pool2d", [randn(1, 2, 7, 7)], avg_pool(3, 2, 1, include=False),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
                "count_include_pad": False}, name="exclude_pad", reduce_len=9),
    Case("avg_pool2d", [randn(1, 2, 6, 7)], avg_pool(3, 2, 1, ceil=True),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True},
         name="ceil_include_pad", reduce_len=9),
    Case("avg_pool2d", [randn(1, 2, 6, 7)], avg_pool(3, 2, 1, ceil=True, include=False),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True,
                "count_include_pad": False}, name="ceil_exclude_pad", reduce_len=9),
    Case("avg_pool2d", [randn(1, 1, 5, 5)], avg_pool(2, 2, 0, ceil=True),
         attrs={"kernel_size": [2, 2], "ceil_mode": True}, name="ceil_no_pad", reduce_len=4),
    Case("avg_pool2d", [randn(2, 3, 6, 4, layout="transposed")], avg_pool((2, 3), (1, 1)),
         attrs={"kernel_size": [2, 3], "stride": [1, 1]}, name="transposed", reduce_len=6),
    Case("avg_pool2d", [randn(3, 4, 4)], avg_pool(2), attrs={"kernel_size": [2, 2]},
         name="unbatched", reduce_len=4),
    Case("avg_pool2d", [randn(1, 2, 7, 6, dtype="float64")], avg_pool(3, 2, 1, ceil=True),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True},
         name="f64", reduce_len=9),
    Case("avg_pool2d", [randn(1, 1, 4, 4)], attrs={"kernel_size": [3, 3], "padding": [2, 2]},
         name="pad_too_big", error="pad should be at most half"),
    Case("avg_pool2d", [ints(0, 5, 1, 1, 4, 4)], attrs={"kernel_size": [2, 2]}, name="int",
         error="avg_pool2d: expected a floating input, got int64"),
]

ADAPTIVE = [
    Case("adaptive_avg_pool2d", [randn(2, 3, 5, 7)], lambda x: F.adaptive_avg_pool2d(x, 1),
         attrs={"output_size": [1]}, name="global", reduce_len=35),
    Case("adaptive_avg_pool2d", [randn(2, 3, 8, 6)],
         lambda x: F.adaptive_avg_pool2d(x, (4, 3)), attrs={"output_size": [4, 3]},
         name="dividing", reduce_len=4),
    Case("adaptive_avg_pool2d", [randn(1, 2, 7, 5)],
         lambda x: F.adaptive_avg_pool2d(x, (3, 2)), attrs={"output_size": [3, 2]},
         name="non_dividing", reduce_len=9),
    Case("adaptive_avg_pool2d", [randn(1, 2, 3, 3, layout="transposed")],
         lambda x: F.adaptive_avg_pool2d(x, (5, 4)), attrs={"output_size": [5, 4]},
         name="upsampling_transposed", reduce_len=4),
    Case("adaptive_avg_pool2d", [randn(3, 6, 6)], lambda x: F.adaptive_avg_pool2d(x, 2),
         attrs={"output_size": [2]}, name="unbatched", reduce_len=9),
    Case("adaptive_avg_pool2d", [randn(2, 2, 7, 9, dtype="float64")],
         lambda x: F.adaptive_avg_pool2d(x, (3, 4)), attrs={"output_size": [3, 4]},
         name="f64", reduce_len=9),
    Case("adaptive_avg_pool2d", [randn(1, 2, 0, 4)], attrs={"output_size": [2, 2]},
         name="empty_spatial", error="non-zero size for non-batch dimensions"),
]

# More gradient coverage: stride, dilation and groups together; ties.
GRAD_ROWS = [
    Case("conv2d", [randn(2, 6, 9, 8, dtype="float64"), randn(4, 3, 2, 3, dtype="float64"),
                    randn(4, dtype="float64")],
         conv(stride=(2, 3), padding=(1, 2), dilation=(2, 1), groups=2),
         attrs={"stride": [2, 3], "padding": [1, 2], "dilation": [2, 1], "groups": 2},
         name="f64_stride_dilation_groups", reduce_len=18),
    Case("conv2d", [randn(2, 6, 9, 8), randn(4, 3, 2, 3), randn(4)],
         conv(stride=(2, 3), padding=(1, 2), dilation=(2, 1), groups=2),
         attrs={"stride": [2, 3], "padding": [1, 2], "dilation": [2, 1], "groups": 2},
         name="stride_dilation_groups", reduce_len=18),
    Case("conv2d", [randn(3, 7, 7, dtype="float64"), randn(3, 3, 3, 3, dtype="float64"),
                    randn(3, dtype="float64")], conv(stride=(2, 2)),
         attrs={"stride": [2, 2]}, name="f64_unbatched_stride_skips_edge", reduce_len=27),
    # Ties: PyTorch sends the gradient to the first max of each window. The
    # finite difference at a tie is one-sided (not differentiable), so no FD.
    Case("max_pool2d", [values([[[[1.0, 1.0, 0.0], [1.0, 0.5, 2.0], [2.0, 2.0, 2.0]]]])],
         max_pool(2, 1), attrs={"kernel_size": [2, 2], "stride": [1, 1]}, name="ties", fd=False),
    Case("max_pool2d", [randn(2, 2, 5, 7, dtype="float64", layout="transposed")],
         max_pool((2, 3), (2, 2), (1, 0), (2, 1), True),
         attrs={"kernel_size": [2, 3], "stride": [2, 2], "padding": [1, 0],
                "dilation": [2, 1], "ceil_mode": True}, name="f64_ceil_asymmetric"),
    Case("avg_pool2d", [randn(2, 2, 5, 6, dtype="float64", layout="strided")],
         avg_pool((3, 2), (2, 3), (1, 1), ceil=True, include=False),
         attrs={"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "ceil_mode": True,
                "count_include_pad": False}, name="f64_ceil_exclude_asymmetric", reduce_len=6),
    Case("adaptive_avg_pool2d", [randn(3, 5, 4, dtype="float64", layout="transposed")],
         lambda x: F.adaptive_avg_pool2d(x, (2, 3)), attrs={"output_size": [2, 3]},
         name="f64_unbatched_transposed", reduce_len=9),
]


def conv_input(input_size, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return lambda g, w: torch.nn.grad.conv2d_input(input_size, w, g, stride, padding, dilation,
                                                   groups)


def conv_weight(weight_size, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return lambda g, x: torch.nn.grad.conv2d_weight(x, weight_size, g, stride, padding, dilation,
                                                    groups)


def conv_attrs(size_name, size, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return {size_name: list(size), "stride": list(stride), "padding": list(padding),
            "dilation": list(dilation), "groups": groups}


def max_pool_backward(k, s, p=(0, 0), d=(1, 1), ceil=False):
    def run(g, x):
        _, indices = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        return torch.ops.aten.max_pool2d_with_indices_backward(g, x, k, s, p, d, ceil, indices)
    return run


def avg_pool_backward(k, s, p=(0, 0), ceil=False, include=True):
    return lambda g, x: torch.ops.aten.avg_pool2d_backward(g, x, k, s, p, ceil, include, None)


# The backward ops themselves have no gradient rules (grad=False throughout).
BACKWARD_OPS = [
    Case("conv2d_backward_input", [randn(2, 6, 4, 4), randn(6, 2, 3, 3)],
         conv_input((2, 4, 7, 7), (2, 2), (1, 1), (1, 1), 2),
         attrs=conv_attrs("input_size", (2, 4, 7, 7), (2, 2), (1, 1), (1, 1), 2),
         name="stride_groups", reduce_len=27, grad=False),
    Case("conv2d_backward_input", [randn(1, 3, 4, 4), randn(3, 2, 3, 2, layout="strided")],
         conv_input((1, 2, 8, 9), (1, 2), (0, 1), (2, 3)),
         attrs=conv_attrs("input_size", (1, 2, 8, 9), (1, 2), (0, 1), (2, 3)),
         name="dilation_strided", reduce_len=18, grad=False),
    Case("conv2d_backward_input", [randn(2, 4, 3, 3, dtype="float64", layout="transposed"),
                                   randn(4, 3, 3, 3, dtype="float64")],
         conv_input((2, 3, 8, 8), (2, 2)), attrs=conv_attrs("input_size", (2, 3, 8, 8), (2, 2)),
         name="f64_stride_skips_edge", reduce_len=36, grad=False),
    Case("conv2d_backward_input", [randn(4, 5, 5), randn(4, 3, 3, 3)],
         lambda g, w: torch.nn.grad.conv2d_input((1, 3, 7, 7), w, g[None])[0],
         attrs=conv_attrs("input_size", (3, 7, 7)), name="unbatched", reduce_len=36, grad=False),
    Case("conv2d_backward_input", [randn(0, 2, 3, 3), randn(2, 3, 3, 3)],
         conv_input((0, 3, 5, 5)), attrs=conv_attrs("input_size", (0, 3, 5, 5)),
         name="empty_batch", grad=False),
    Case("conv2d_backward_input", [randn(1, 2, 4, 4), randn(2, 3, 3, 3)],
         attrs=conv_attrs("input_size", (1, 3, 5, 5)), name="wrong_grad_shape",
         error="expected grad_output of shape [1, 2, 3, 3] (conv2d's output), got [1, 2, 4, 4]"),
    Case("conv2d_backward_weight", [randn(2, 6, 4, 4), randn(2, 4, 7, 7)],
         conv_weight((6, 2, 3, 3), (2, 2), (1, 1), (1, 1), 2),
         attrs=conv_attrs("weight_size", (6, 2, 3, 3), (2, 2), (1, 1), (1, 1), 2),
         name="stride_groups", reduce_len=18, grad=False),
    Case("conv2d_backward_weight", [randn(1, 3, 4, 4, layout="transposed"),
                                    randn(1, 2, 8, 9, layout="expanded")],
         conv_weight((3, 2, 3, 2), (1, 2), (0, 1), (2, 3)),
         attrs=conv_attrs("weight_size", (3, 2, 3, 2), (1, 2), (0, 1), (2, 3)),
         name="dilation_layouts", reduce_len=30, grad=False),
    Case("conv2d_backward_weight", [randn(2, 4, 3, 3, dtype="float64"),
                                    randn(2, 3, 8, 8, dtype="float64", layout="strided")],
         conv_weight((4, 3, 3, 3), (2, 2)), attrs=conv_attrs("weight_size", (4, 3, 3, 3), (2, 2)),
         name="f64_stride_skips_edge", reduce_len=18, grad=False),
    Case("conv2d_backward_weight", [randn(4, 5, 5), randn(3, 7, 7)],
         lambda g, x: torch.nn.grad.conv2d_weight(x[None], (4, 3, 3, 3), g[None]),
         attrs=conv_attrs("weight_size", (4, 3, 3, 3)), name="unbatched", reduce_len=25,
         grad=False),
    Case("conv2d_backward_weight", [randn(0, 2, 3, 3), randn(0, 3, 5, 5)],
         conv_weight((2, 3, 3, 3)), attrs=conv_attrs("weight_size", (2, 3, 3, 3)),
         name="empty_batch", grad=False),
    Case("max_pool2d_backward", [randn(2, 3, 2, 2), randn(2, 3, 4, 4)],
         max_pool_backward((2, 2), (2, 2)), attrs={"kernel_size": [2, 2]}, grad=False),
    Case("max_pool2d_backward", [randn(1, 2, 4, 4), randn(1, 2, 7, 6, layout="transposed")],
         max_pool_backward((3, 2), (2, 2), (1, 1), (1, 2), True),
         attrs={"kernel_size": [3, 2], "stride": [2], "padding": [1], "dilation": [1, 2],
                "ceil_mode": True}, name="ceil_dilation_transposed", grad=False),
    Case("max_pool2d_backward", [randn(2, 3, 3, dtype="float64", layout="strided"),
                                 values([[[1.0, 1.0, 0.0, 3.0], [1.0, 0.5, 3.0, 2.0],
                                          [2.0, 2.0, 2.0, 2.0], [0.0, 2.0, 1.0, 1.0]]] * 2,
                                        "float64")],
         max_pool_backward((2, 2), (1, 1)), attrs={"kernel_size": [2, 2], "stride": [1, 1]},
         name="ties_f64_unbatched", grad=False),
    Case("max_pool2d_backward", [randn(1, 1, 3, 3), randn(1, 1, 4, 4)],
         attrs={"kernel_size": [2, 2]}, name="wrong_grad_shape",
         error="expected grad_output of shape [1, 1, 2, 2] (max_pool2d's output)"),
    Case("avg_pool2d_backward", [randn(1, 2, 4, 4), randn(1, 2, 7, 7)],
         avg_pool_backward((3, 3), (2, 2), (1, 1)),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, name="include_pad",
         grad=False),
    Case("avg_pool2d_backward", [randn(1, 2, 4, 4, layout="transposed"), randn(1, 2, 6, 7)],
         avg_pool_backward((3, 3), (2, 2), (1, 1), True, False),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True,
                "count_include_pad": False}, name="ceil_exclude_pad", grad=False),
    Case("avg_pool2d_backward", [randn(2, 4, 4, dtype="float64"), randn(2, 6, 7, dtype="float64")],
         avg_pool_backward((3, 3), (2, 2), (1, 1), True, True),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True},
         name="f64_ceil_unbatched", grad=False),
    Case("adaptive_avg_pool2d_backward", [randn(1, 2, 3, 2), randn(1, 2, 7, 5)],
         torch.ops.aten._adaptive_avg_pool2d_backward, name="non_dividing", grad=False),
    Case("adaptive_avg_pool2d_backward", [randn(2, 5, 4, dtype="float64", layout="strided"),
                                          randn(2, 3, 3, dtype="float64", layout="transposed")],
         torch.ops.aten._adaptive_avg_pool2d_backward, name="f64_upsampling_unbatched",
         grad=False),
    Case("adaptive_avg_pool2d_backward", [randn(1, 2, 3), randn(1, 2, 7, 5)],
         name="rank_mismatch", error="expected grad_output with the input's number of dims"),
]

CASES = CONV + MAX_POOL + MAX_POOL_INDICES + AVG_POOL + ADAPTIVE + GRAD_ROWS + BACKWARD_OPS
