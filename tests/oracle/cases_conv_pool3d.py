"""Rows for the 3-D convolution and pooling ops (conv3d, conv_transpose3d,
max_pool3d, avg_pool3d) and for the backward ops their gradient rules call.
For conv, reduce_len is the dot-product length C/groups * kd * kh * kw."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, ints, randn, values


def conv(stride=1, padding=0, dilation=1, groups=1):
    return lambda x, w, b=None: F.conv3d(x, w, b, stride, padding, dilation, groups)


def conv_t(stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return lambda x, w, b=None: F.conv_transpose3d(x, w, b, stride, padding, output_padding,
                                                   groups, dilation)


CONV = [
    Case("conv3d", [randn(2, 3, 5, 6, 5), randn(4, 3, 3, 3, 3), randn(4)], conv(),
         name="basic", reduce_len=81),
    Case("conv3d", [randn(1, 4, 6, 7, 5), randn(6, 2, 2, 3, 2), absent()],
         conv((2, 1, 2), (1, 0, 1), (1, 2, 1), 2),
         attrs={"stride": [2, 1, 2], "padding": [1, 0, 1], "dilation": [1, 2, 1], "groups": 2},
         name="stride_pad_dilation_groups_no_bias", reduce_len=24),
    Case("conv3d", [randn(2, 4, 5, 5, dtype="float64"), randn(3, 2, 3, 2, 3, dtype="float64"),
                    randn(3, dtype="float64")], conv(1, 1), attrs={"padding": [1]},
         name="f64_unbatched", reduce_len=36),
    Case("conv3d", [randn(1, 2, 4, 5, 6, dtype="float64", layout="transposed"),
                    randn(2, 1, 2, 2, 2, dtype="float64", layout="strided"),
                    randn(2, dtype="float64")], conv((1, 2, 2), 0, 1, 2),
         attrs={"stride": [1, 2, 2], "groups": 2}, name="f64_depthwise_layouts", reduce_len=8),
    Case("conv3d", [randn(0, 2, 3, 3, 3), randn(2, 2, 2, 2, 2), randn(2)], conv(),
         name="empty_batch"),
    Case("conv3d", [randn(3, 4, 4), randn(2, 3, 3, 3, 3), absent()], name="input_3d",
         error="conv3d: expected 4-D (unbatched) or 5-D (batched) input, got shape [3, 4, 4]"),
    Case("conv3d", [randn(1, 2, 4, 4, 4), randn(2, 3, 3, 3, 3), absent()], name="channels",
         error="to have 3 channels, but got 2 channels instead"),
    Case("conv3d", [randn(1, 2, 2, 4, 4), randn(2, 2, 3, 3, 3), absent()], name="kernel_too_big",
         error="is less than the (dilated) kernel size"),
    Case("conv3d", [ints(0, 3, 1, 1, 3, 3, 3), ints(0, 3, 1, 1, 2, 2, 2), absent()], name="int",
         error="conv3d: expected floating inputs, got int64"),
]

CONV_TRANSPOSE = [
    Case("conv_transpose3d", [randn(2, 4, 3, 4, 3), randn(4, 3, 3, 2, 3), randn(3)], conv_t(),
         name="basic", reduce_len=72),
    Case("conv_transpose3d", [randn(1, 4, 3, 3, 4), randn(4, 2, 2, 3, 2), absent()],
         conv_t((2, 1, 2), (1, 0, 0), (1, 0, 1), 2, (1, 2, 1)),
         attrs={"stride": [2, 1, 2], "padding": [1, 0, 0], "output_padding": [1, 0, 1],
                "groups": 2, "dilation": [1, 2, 1]}, name="stride_groups_dilation", reduce_len=24),
    Case("conv_transpose3d", [randn(2, 3, 3, 3, dtype="float64", layout="transposed"),
                              randn(2, 3, 2, 2, 2, dtype="float64"), randn(3, dtype="float64")],
         conv_t(2, 1, 1), attrs={"stride": [2], "padding": [1], "output_padding": [1]},
         name="f64_unbatched", reduce_len=16),
    Case("conv_transpose3d", [randn(1, 2, 2, 3, 3, dtype="float64"),
                              randn(2, 1, 2, 2, 2, dtype="float64"), absent()],
         conv_t(1, 0, (1, 0, 1), 1, (2, 1, 2)),
         attrs={"output_padding": [1, 0, 1], "dilation": [2, 1, 2]},
         name="f64_output_padding_below_dilation", reduce_len=16),
    Case("conv_transpose3d", [randn(1, 2, 3, 3, 3), randn(2, 2, 2, 2, 2), absent()],
         attrs={"stride": [2], "output_padding": [2]}, name="output_padding_too_big",
         error="output padding must be smaller than either stride or dilation"),
    Case("conv_transpose3d", [randn(1, 3, 3, 3, 3), randn(2, 2, 2, 2, 2), absent()],
         name="channels", error="to have 2 channels, but got 3 channels instead"),
]


def max_pool(k, s=None, p=0, d=1, ceil=False):
    return lambda x: F.max_pool3d(x, k, s, p, d, ceil_mode=ceil)


def avg_pool(k, s=None, p=0, ceil=False, include=True):
    return lambda x: F.avg_pool3d(x, k, s, p, ceil_mode=ceil, count_include_pad=include)


MAX_POOL = [
    Case("max_pool3d", [randn(2, 3, 4, 4, 4)], max_pool(2), attrs={"kernel_size": [2]},
         name="k2"),
    Case("max_pool3d", [randn(1, 2, 5, 7, 6)], max_pool((3, 2, 3), (2, 1, 2), (1, 1, 0), (1, 2, 1),
                                                        True),
         attrs={"kernel_size": [3, 2, 3], "stride": [2, 1, 2], "padding": [1, 1, 0],
                "dilation": [1, 2, 1], "ceil_mode": True}, name="ceil_dilation_asymmetric"),
    Case("max_pool3d", [randn(2, 5, 6, 5, dtype="float64", layout="transposed")],
         max_pool(2, 1, 1), attrs={"kernel_size": [2], "stride": [1], "padding": [1]},
         name="f64_unbatched_padded"),
    Case("max_pool3d", [ints(-50, 50, 1, 2, 4, 4, 4)], max_pool(2, 2, 1),
         attrs={"kernel_size": [2], "stride": [2], "padding": [1]}, name="i64"),
    Case("max_pool3d", [randn(0, 2, 4, 4, 4)], max_pool(2), attrs={"kernel_size": [2]},
         name="empty_batch"),
    Case("max_pool3d", [randn(1, 1, 4, 4, 4)], attrs={"kernel_size": [2], "padding": [2]},
         name="pad_too_big", error="pad should be at most half of effective kernel size"),
    Case("max_pool3d", [randn(1, 3, 4, 4)], attrs={"kernel_size": [2, 5, 2]}, name="too_small",
         error="is too small"),
    Case("max_pool3d", [randn(3, 4, 4)], attrs={"kernel_size": [2]}, name="input_3d",
         error="max_pool3d: expected 4-D (unbatched) or 5-D (batched) input"),
]

AVG_POOL = [
    Case("avg_pool3d", [randn(2, 3, 4, 4, 6)], avg_pool(2), attrs={"kernel_size": [2]},
         name="k2", reduce_len=8),
    Case("avg_pool3d", [randn(1, 2, 5, 7, 6)], avg_pool((3, 3, 2), (2, 2, 1), (1, 1, 1), True),
         attrs={"kernel_size": [3, 3, 2], "stride": [2, 2, 1], "padding": [1, 1, 1],
                "ceil_mode": True}, name="ceil_include_pad", reduce_len=18),
    Case("avg_pool3d", [randn(1, 2, 5, 7, 6, layout="strided")],
         avg_pool((3, 3, 2), (2, 2, 1), (1, 1, 1), True, False),
         attrs={"kernel_size": [3, 3, 2], "stride": [2, 2, 1], "padding": [1, 1, 1],
                "ceil_mode": True, "count_include_pad": False}, name="ceil_exclude_pad",
         reduce_len=18),
    Case("avg_pool3d", [randn(2, 5, 6, 5, dtype="float64")], avg_pool(3, 2, 1, False, False),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "count_include_pad": False},
         name="f64_unbatched_exclude_pad", reduce_len=27),
    Case("avg_pool3d", [ints(0, 5, 1, 1, 4, 4, 4)], attrs={"kernel_size": [2]}, name="int",
         error="avg_pool3d: expected a floating input, got int64"),
]

# More gradient coverage through the forward ops' rules: ties (no finite
# differences there: one-sided), ceil_mode and padding together.
GRAD_ROWS = [
    Case("max_pool3d", [values([[[[[1.0, 1.0], [0.0, 2.0]], [[2.0, 1.0], [2.0, 0.5]]]]])],
         max_pool(2, 1, 1), attrs={"kernel_size": [2], "stride": [1], "padding": [1]},
         name="ties", fd=False),
    Case("max_pool3d", [randn(1, 2, 4, 5, 5, dtype="float64", layout="strided")],
         max_pool((2, 3, 2), (2, 2, 1), (1, 1, 0), (1, 1, 2), True),
         attrs={"kernel_size": [2, 3, 2], "stride": [2, 2, 1], "padding": [1, 1, 0],
                "dilation": [1, 1, 2], "ceil_mode": True}, name="f64_ceil_dilation"),
    Case("avg_pool3d", [randn(2, 1, 5, 4, 5, dtype="float64", layout="transposed")],
         avg_pool((3, 2, 3), (2, 2, 2), (1, 1, 1), True, False),
         attrs={"kernel_size": [3, 2, 3], "stride": [2], "padding": [1], "ceil_mode": True,
                "count_include_pad": False}, name="f64_ceil_exclude_transposed", reduce_len=18),
]


def conv_attrs(size_name, size, stride=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1),
               groups=1):
    return {size_name: list(size), "stride": list(stride), "padding": list(padding),
            "dilation": list(dilation), "groups": groups}


def conv_input(input_size, stride=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1):
    return lambda g, w: torch.nn.grad.conv3d_input(input_size, w, g, stride, padding, dilation,
                                                   groups)


def conv_weight(weight_size, stride=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1):
    return lambda g, x: torch.nn.grad.conv3d_weight(x, weight_size, g, stride, padding, dilation,
                                                    groups)


def max_pool_backward(k, s, p=(0, 0, 0), d=(1, 1, 1), ceil=False):
    def run(g, x):
        _, indices = F.max_pool3d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        return torch.ops.aten.max_pool3d_with_indices_backward(g, x, k, s, p, d, ceil, indices)
    return run


def avg_pool_backward(k, s, p=(0, 0, 0), ceil=False, include=True):
    return lambda g, x: torch.ops.aten.avg_pool3d_backward(g, x, k, s, p, ceil, include, None)


# The backward ops themselves have no gradient rules (grad=False throughout).
BACKWARD_OPS = [
    Case("conv3d_backward_input", [randn(2, 6, 3, 3, 3), randn(6, 2, 3, 2, 3)],
         conv_input((2, 4, 5, 6, 5), (2, 2, 2), (1, 0, 1), (1, 1, 1), 2),
         attrs=conv_attrs("input_size", (2, 4, 5, 6, 5), (2, 2, 2), (1, 0, 1), (1, 1, 1), 2),
         name="stride_groups", reduce_len=54, grad=False),
    Case("conv3d_backward_input", [randn(1, 3, 3, 3, 3, dtype="float64", layout="transposed"),
                                   randn(3, 2, 2, 2, 2, dtype="float64")],
         conv_input((1, 2, 5, 7, 5), (1, 2, 1), (0, 0, 0), (2, 2, 2)),
         attrs=conv_attrs("input_size", (1, 2, 5, 7, 5), (1, 2, 1), (0, 0, 0), (2, 2, 2)),
         name="f64_dilation_skips_edge", reduce_len=24, grad=False),
    Case("conv3d_backward_input", [randn(0, 2, 2, 2, 2), randn(2, 3, 2, 2, 2)],
         conv_input((0, 3, 3, 3, 3)), attrs=conv_attrs("input_size", (0, 3, 3, 3, 3)),
         name="empty_batch", grad=False),
    Case("conv3d_backward_input", [randn(1, 2, 3, 3, 3), randn(2, 3, 2, 2, 2)],
         attrs=conv_attrs("input_size", (1, 3, 3, 3, 3)), name="wrong_grad_shape",
         error="expected grad_output of shape [1, 2, 2, 2, 2] (conv3d's output)"),
    Case("conv3d_backward_weight", [randn(2, 6, 3, 3, 3), randn(2, 4, 5, 6, 5)],
         conv_weight((6, 2, 3, 2, 3), (2, 2, 2), (1, 0, 1), (1, 1, 1), 2),
         attrs=conv_attrs("weight_size", (6, 2, 3, 2, 3), (2, 2, 2), (1, 0, 1), (1, 1, 1), 2),
         name="stride_groups", reduce_len=24, grad=False),
    Case("conv3d_backward_weight", [randn(1, 3, 3, 3, 3, dtype="float64"),
                                    randn(1, 2, 5, 7, 5, dtype="float64", layout="strided")],
         conv_weight((3, 2, 2, 2, 2), (1, 2, 1), (0, 0, 0), (2, 2, 2)),
         attrs=conv_attrs("weight_size", (3, 2, 2, 2, 2), (1, 2, 1), (0, 0, 0), (2, 2, 2)),
         name="f64_dilation_skips_edge", reduce_len=27, grad=False),
    Case("conv3d_backward_weight", [randn(0, 2, 2, 2, 2), randn(0, 3, 3, 3, 3)],
         conv_weight((2, 3, 2, 2, 2)), attrs=conv_attrs("weight_size", (2, 3, 2, 2, 2)),
         name="empty_batch", grad=False),
    Case("max_pool3d_backward", [randn(1, 2, 3, 4, 4), randn(1, 2, 5, 7, 6, layout="transposed")],
         max_pool_backward((3, 2, 3), (2, 2, 2), (1, 1, 1), (1, 2, 1), True),
         attrs={"kernel_size": [3, 2, 3], "stride": [2], "padding": [1], "dilation": [1, 2, 1],
                "ceil_mode": True}, name="ceil_dilation_transposed", grad=False),
    Case("max_pool3d_backward", [randn(2, 1, 1, 1, dtype="float64"),
                                 values([[[[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.5], [1.0, 1.0]]]] * 2,
                                        "float64")],
         max_pool_backward((2, 2, 2), (2, 2, 2)), attrs={"kernel_size": [2]},
         name="ties_f64_unbatched", grad=False),
    Case("max_pool3d_backward", [randn(1, 1, 3, 3, 3), randn(1, 1, 4, 4, 4)],
         attrs={"kernel_size": [2]}, name="wrong_grad_shape",
         error="expected grad_output of shape [1, 1, 2, 2, 2] (max_pool3d's output)"),
    Case("avg_pool3d_backward", [randn(1, 2, 3, 4, 4, layout="strided"), randn(1, 2, 5, 7, 6)],
         avg_pool_backward((3, 3, 2), (2, 2, 2), (1, 1, 1), True, False),
         attrs={"kernel_size": [3, 3, 2], "stride": [2], "padding": [1], "ceil_mode": True,
                "count_include_pad": False}, name="ceil_exclude_pad", grad=False),
    Case("avg_pool3d_backward", [randn(2, 3, 4, 3, dtype="float64"),
                                 randn(2, 5, 6, 5, dtype="float64")],
         avg_pool_backward((3, 3, 3), (2, 2, 2), (1, 1, 1), True, True),
         attrs={"kernel_size": [3], "stride": [2], "padding": [1], "ceil_mode": True},
         name="f64_ceil_unbatched", grad=False),
]

CASES = CONV + CONV_TRANSPOSE + MAX_POOL + AVG_POOL + GRAD_ROWS + BACKWARD_OPS
