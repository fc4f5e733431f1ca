"""Rows for the fused ops the fusion passes write: a producer and an
activation as one op (linear_act, conv2d_act), a convolution with its
residual add and activation (conv2d_fused), and a chain of elementwise ops
as one (fused_elementwise), against PyTorch running the ops one after the
other."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, ints, randn, values

ACTIVATIONS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
               "gelu": F.gelu}


def linear_then(activation):
    return lambda x, w, b=None: ACTIVATIONS[activation](F.linear(x, w, b))


def conv_then(activation, padding=(0, 0)):
    return lambda x, w, b=None: ACTIVATIONS[activation](F.conv2d(x, w, b, padding=padding))


LINEAR_ACT = [
    Case("linear_act", [randn(1, 512), randn(256, 512), randn(256)], linear_then("relu"),
         name="w1_relu_b1", reduce_len=512),
    Case("linear_act", [randn(64, 128), randn(32, 128), randn(32)], linear_then("relu"),
         name="relu_b64", reduce_len=128),
    Case("linear_act", [randn(1, 400), randn(120, 400), randn(120)], linear_then("sigmoid"),
         attrs={"activation": "sigmoid"}, name="lenet_sigmoid_b1", reduce_len=400),
    Case("linear_act", [randn(3, 5), randn(4, 5), absent()], linear_then("tanh"),
         attrs={"activation": "tanh"}, name="tanh_no_bias", reduce_len=5),
    Case("linear_act", [randn(2, 3, 5, layout="transposed"), randn(4, 5), randn(4)],
         linear_then("sigmoid"), attrs={"activation": "sigmoid"}, name="x_3d_transposed",
         reduce_len=5),
    Case("linear_act", [randn(3, 5, dtype="float64"), randn(4, 5, dtype="float64"),
                        randn(4, dtype="float64")], linear_then("tanh"),
         attrs={"activation": "tanh"}, name="f64", reduce_len=5),
    # gelu (fuse_linear_gelu): its backward computes the linear again.
    Case("linear_act", [randn(7, 48), randn(40, 48), randn(40)], linear_then("gelu"),
         attrs={"activation": "gelu"}, name="gelu", reduce_len=48),
    Case("linear_act", [randn(2, 3, 5, layout="transposed"), randn(4, 5), absent()],
         linear_then("gelu"), attrs={"activation": "gelu"}, name="gelu_3d_no_bias",
         reduce_len=5),
    Case("linear_act", [randn(3, 5, dtype="float64"), randn(4, 5, dtype="float64"),
                        randn(4, dtype="float64")], linear_then("gelu"),
         attrs={"activation": "gelu"}, name="gelu_f64", reduce_len=5),
    Case("linear_act", [randn(2, 5), randn(3, 5), randn(3)], attrs={"activation": "elu"},
         name="unknown_activation",
         error="linear_act: activation must be an activation whose backward reads only its "
               "output (relu, sigmoid, tanh), or gelu, got 'elu'"),
    Case("linear_act", [ints(0, 3, 2, 5), ints(0, 3, 3, 5), absent()],
         attrs={"activation": "sigmoid"}, name="int_sigmoid",
         error="linear_act: activation sigmoid cannot run in place over a result of dtype "
               "int64 (it computes in float32)"),
    Case("linear_act", [randn(2, 5), randn(3, 4), absent()], name="shapes",
         error="linear: mat1 and mat2 shapes cannot be multiplied (2x5 and 4x3)"),
]

CONV2D_ACT = [
    Case("conv2d_act", [randn(2, 1, 28, 28), randn(6, 1, 5, 5), randn(6)],
         conv_then("sigmoid", padding=(2, 2)), attrs={"padding": [2, 2], "activation": "sigmoid"},
         name="lenet1_sigmoid", reduce_len=25),
    Case("conv2d_act", [randn(2, 6, 14, 14), randn(16, 6, 5, 5), randn(16)], conv_then("relu"),
         name="lenet2_relu", reduce_len=150),
    Case("conv2d_act", [randn(1, 3, 7, 7), randn(4, 3, 3, 3), absent()], conv_then("tanh"),
         attrs={"activation": "tanh"}, name="tanh_no_bias", reduce_len=27),
    Case("conv2d_act", [randn(1, 1, 3, 3), randn(1, 1, 5, 5), absent()], name="kernel_too_big",
         error="Kernel size: (5 x 5). Kernel size can't be greater than actual input size"),
]


# conv2d_fused's activations, with its alpha and beta (ops/conv_fused_ops.cpp).
EPILOGUES = {
    "none": lambda v, a, b: v,
    "relu": lambda v, a, b: torch.relu(v),
    "clamp": lambda v, a, b: torch.clamp(v, a, b),
    "hardsigmoid": lambda v, a, b: torch.clamp(v * a + b, 0, 1),
    "hardswish": lambda v, a, b: v * torch.clamp(v * a + b, 0, 1),
    "sigmoid": lambda v, a, b: torch.sigmoid(v),
    "silu": lambda v, a, b: F.silu(v),
    "tanh": lambda v, a, b: torch.tanh(v),
    "leaky_relu": lambda v, a, b: torch.clamp_min(F.leaky_relu(v, a), b),
}


def conv_epilogue(activation="none", alpha=0.0, beta=0.0, after=(1.0, 0.0), **conv):
    """(torch function, attrs) of conv2d_fused: activation(conv2d + residual)
    * scale_after + shift_after."""
    def fn(x, w, b=None, r=None):
        y = F.conv2d(x, w, b, **conv)
        y = EPILOGUES[activation](y if r is None else y + r, alpha, beta)
        return y * after[0] + after[1] if after != (1.0, 0.0) else y
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in conv.items()}
    return fn, dict(attrs, activation=activation, alpha=alpha, beta=beta,
                    scale_after=after[0], shift_after=after[1])


def fused_conv(name, inputs, activation="none", alpha=0.0, beta=0.0, reduce_len=9,
               after=(1.0, 0.0), **conv):
    fn, attrs = conv_epilogue(activation, alpha, beta, after, **conv)
    return Case("conv2d_fused", inputs, fn, attrs=attrs, name=name, reduce_len=reduce_len,
                grad=False)


def nhwc_conv(name, inputs, activation="none", alpha=0.0, beta=0.0, reduce_len=9, **conv):
    """conv2d_fused {layout=nhwc}: x, residual and output [N, H, W, C]."""
    fn, attrs = conv_epilogue(activation, alpha, beta, **conv)

    def nchw(t):
        return None if t is None else t.permute(0, 3, 1, 2)

    def channels_last(x, w, b=None, r=None):
        return fn(nchw(x), w, b, nchw(r)).permute(0, 2, 3, 1)
    return Case("conv2d_fused", inputs, channels_last, attrs=dict(attrs, layout="nhwc"),
                name=name, reduce_len=reduce_len, grad=False)


# Channels-last (jit/passes/carry_conv_layout.cpp writes it): Winograd's
# kernels (3x3, stride 1, channels in sixteens, >= 16 pixels), oneDNN's
# direct ones for the rest (1x1, strides, odd channels, groups, 1x1 and
# 2x2 images), the float64 loop.
CONV2D_FUSED_NHWC = [
    nhwc_conv("nhwc_winograd_relu_residual", [randn(1, 8, 8, 32), randn(32, 32, 3, 3), randn(32),
                                              randn(1, 8, 8, 32)], "relu", padding=(1, 1),
              reduce_len=288),
    nhwc_conv("nhwc_3x3_128_channels_batch2", [randn(2, 12, 12, 128), randn(128, 128, 3, 3),
                                           randn(128)], "relu", padding=(1, 1), reduce_len=1152),
    nhwc_conv("nhwc_winograd_no_padding_hardswish", [randn(1, 9, 7, 16), randn(48, 16, 3, 3),
                                                     absent(), randn(1, 7, 5, 48)],
              "hardswish", 0.2, 0.5, reduce_len=144),
    nhwc_conv("nhwc_winograd_leaky_floor", [randn(1, 6, 6, 16), randn(16, 16, 3, 3), randn(16)],
              "leaky_relu", 0.2, -0.3, padding=(1, 1), reduce_len=144),
    nhwc_conv("nhwc_small_image_direct", [randn(1, 2, 2, 32), randn(32, 32, 3, 3), randn(32),
                                          randn(1, 2, 2, 32)], "relu", padding=(1, 1),
              reduce_len=288),
    nhwc_conv("nhwc_1x1_stride2", [randn(2, 9, 9, 24), randn(40, 24, 1, 1), randn(40)],
              stride=(2, 2), reduce_len=24),
    nhwc_conv("nhwc_odd_channels_clamp", [randn(1, 7, 6, 5), randn(7, 5, 3, 3), randn(7)],
              "clamp", -0.5, 0.5, padding=(1, 1), reduce_len=45),
    nhwc_conv("nhwc_1x1_image_sigmoid", [randn(1, 1, 1, 40), randn(24, 40, 1, 1), randn(24)],
              "sigmoid", reduce_len=40),
    nhwc_conv("nhwc_groups_silu", [randn(1, 6, 6, 8), randn(8, 4, 3, 3), randn(8)], "silu",
              groups=2, padding=(1, 1), reduce_len=36),
    nhwc_conv("nhwc_depthwise_stride2", [randn(1, 11, 11, 16), randn(16, 1, 5, 5), randn(16)],
              "tanh", groups=16, padding=(2, 2), stride=(2, 2), reduce_len=25),
    # Depthwise layers inside a chain (MobileNet's, PP-LCNet's: oneDNN's
    # channels-last kernel), with their activations: relu6, hardswish,
    # hardsigmoid; odd channel counts, odd sizes at stride 2, 1x1 images,
    # batch 2, a residual.
    nhwc_conv("nhwc_depthwise_3x3_relu6_odd_channels", [randn(1, 9, 7, 7), randn(7, 1, 3, 3),
                                                        randn(7)],
              "clamp", 0.0, 6.0, groups=7, padding=(1, 1)),
    nhwc_conv("nhwc_depthwise_5x5_stride2_hardswish_batch2", [randn(2, 11, 9, 24),
                                                              randn(24, 1, 5, 5), randn(24)],
              "hardswish", 1 / 6, 0.5, groups=24, padding=(2, 2), stride=(2, 2), reduce_len=25),
    nhwc_conv("nhwc_depthwise_3x3_stride2_hardsigmoid", [randn(1, 7, 7, 40), randn(40, 1, 3, 3),
                                                         absent()],
              "hardsigmoid", 1 / 6, 0.5, groups=40, padding=(1, 1), stride=(2, 2)),
    nhwc_conv("nhwc_depthwise_1x1_image_relu_residual", [randn(1, 1, 1, 16), randn(16, 1, 3, 3),
                                                         randn(16), randn(1, 1, 1, 16)],
              "relu", groups=16, padding=(1, 1)),
    # A 1x1 convolution over a 1x1 image at batch 1 (squeeze-excitation's
    # FCs) is a matrix-vector product (conv_matvec.cpp), either layout.
    nhwc_conv("nhwc_1x1_image_matvec_hardsigmoid_residual",
              [randn(1, 1, 1, 72), randn(288, 72, 1, 1), randn(288), randn(1, 1, 1, 288)],
              "hardsigmoid", 1 / 6, 0.5, reduce_len=72),
    nhwc_conv("nhwc_strided_input", [randn(1, 10, 10, 16, layout="transposed"),
                                     randn(16, 16, 3, 3), randn(16)], "relu", padding=(1, 1),
              reduce_len=144),
    nhwc_conv("nhwc_f64", [randn(1, 6, 6, 3, dtype="float64"), randn(4, 3, 3, 3, dtype="float64"),
                           randn(4, dtype="float64"), randn(1, 4, 4, 4, dtype="float64")],
              "hardswish", 1 / 6, 0.5, reduce_len=27),
    Case("conv2d_fused", [randn(10, 10, 8), randn(32, 8, 3, 3), randn(32)], name="nhwc_3d",
         attrs={"layout": "nhwc"},
         error="conv2d_fused: layout nhwc takes a 4-D input, got shape [10, 10, 8]"),
    Case("conv2d_fused", [randn(1, 10, 10, 8), randn(32, 8, 3, 3), randn(32)],
         name="unknown_layout", attrs={"layout": "nChw16c"},
         error="conv2d_fused: layout must be nchw or nhwc, got 'nChw16c'"),
]


def nhwc_max_pool(k, s=None, p=0, d=1, ceil=False):
    return lambda x: F.max_pool2d(x.permute(0, 3, 1, 2), k, s, p, d,
                                  ceil_mode=ceil).permute(0, 2, 3, 1)


# max_pool2d_nhwc: max_pool2d over [N, H, W, C] (the pools inside a
# channels-last chain). NaN wins, as in max_pool2d.
MAX_POOL2D_NHWC = [
    Case("max_pool2d_nhwc", [randn(1, 9, 9, 16)], nhwc_max_pool(3, 2, 1),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, name="resnet",
         grad=False),
    Case("max_pool2d_nhwc", [randn(2, 6, 7, 5)], nhwc_max_pool(2),
         attrs={"kernel_size": [2, 2]}, name="odd_channels", grad=False),
    Case("max_pool2d_nhwc", [randn(1, 4, 8, 24)], nhwc_max_pool((1, 2)),
         attrs={"kernel_size": [1, 2]}, name="row_only", grad=False),
    Case("max_pool2d_nhwc", [randn(1, 9, 8, 3)], nhwc_max_pool(3, 2, 1, 2, True),
         attrs={"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "dilation": [2, 2],
                "ceil_mode": True}, name="dilation_ceil_mode", grad=False),
    Case("max_pool2d_nhwc", [randn(1, 6, 6, 8, layout="transposed")], nhwc_max_pool(2, 1),
         attrs={"kernel_size": [2, 2], "stride": [1, 1]}, name="strided_input", grad=False),
    Case("max_pool2d_nhwc", [values([1.0, float("nan"), -2.0, 3.0, 0.5, float("nan"), 4.0, -1.0],
                                    shape=(1, 2, 2, 2))], nhwc_max_pool(2),
         attrs={"kernel_size": [2, 2]}, name="nan_wins", grad=False),
    Case("max_pool2d_nhwc", [randn(1, 5, 5, 4, dtype="float64")], nhwc_max_pool(2, 1),
         attrs={"kernel_size": [2, 2], "stride": [1, 1]}, name="f64", grad=False),
    Case("max_pool2d_nhwc", [randn(6, 6, 4)], attrs={"kernel_size": [2, 2]}, name="not_4d",
         error="max_pool2d_nhwc: expected a 4-D [N, H, W, C] input, got shape [6, 6, 4]"),
]


# Shapes that take each path of kiln's conv2d: oneDNN blocked (3x3, >= 64
# output pixels) and plain (1x1), kiln's depthwise kernel (groups == C) and
# its direct kernel (at most 16 output channels), the float64 loop.
CONV2D_FUSED = [
    # Squeeze-excitation's FCs: 1x1 over a 1x1 image at batch 1, a
    # matrix-vector product (conv_matvec.cpp); at batch 2 oneDNN's.
    fused_conv("se_fc_matvec_relu", [randn(1, 96, 1, 1), randn(24, 96, 1, 1), randn(24)], "relu",
               reduce_len=96),
    fused_conv("se_fc_matvec_hardsigmoid_residual_no_bias",
               [randn(1, 24, 1, 1), randn(96, 24, 1, 1), absent(), randn(1, 96, 1, 1)],
               "hardsigmoid", 0.2, 0.5, reduce_len=24),
    fused_conv("se_fc_batch2", [randn(2, 96, 1, 1), randn(24, 96, 1, 1), randn(24)], "relu",
               reduce_len=96),
    fused_conv("resnet_relu_residual", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), randn(32),
                                        randn(1, 32, 10, 10)], "relu", padding=(1, 1),
               reduce_len=72),
    fused_conv("residual_only_1x1", [randn(1, 24, 8, 8), randn(32, 24, 1, 1), randn(32),
                                     randn(1, 32, 8, 8)], reduce_len=24),
    fused_conv("hardswish_1x1", [randn(2, 24, 7, 7), randn(40, 24, 1, 1), randn(40)],
               "hardswish", 1 / 6, 0.5, reduce_len=24),
    # PaddlePaddle's hardsigmoid (slope 0.2): oneDNN has no post-op for this
    # hardswish, kiln's epilogue runs after the primitive.
    fused_conv("hardswish_paddle_residual", [randn(1, 8, 9, 9), randn(24, 8, 3, 3), absent(),
                                             randn(1, 24, 9, 9)], "hardswish", 0.2, 0.5,
               padding=(1, 1), reduce_len=72),
    fused_conv("relu6_blocked", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), randn(32)], "clamp",
               0.0, 6.0, padding=(1, 1), reduce_len=72),
    fused_conv("hardsigmoid_1x1_image", [randn(1, 40, 1, 1), randn(24, 40, 1, 1), randn(24)],
               "hardsigmoid", 1 / 6, 0.5, reduce_len=40),
    fused_conv("sigmoid_onednn", [randn(1, 16, 6, 6), randn(32, 16, 1, 1), randn(32)],
               "sigmoid", reduce_len=16),
    fused_conv("silu_blocked_stride2", [randn(1, 8, 17, 17), randn(24, 8, 3, 3), randn(24)],
               "silu", padding=(1, 1), stride=(2, 2), reduce_len=72),
    fused_conv("tanh_onednn", [randn(1, 16, 6, 6), randn(32, 16, 1, 1), randn(32)], "tanh",
               reduce_len=16),
    fused_conv("depthwise_hardswish_stride2", [randn(1, 16, 13, 13), randn(16, 1, 5, 5),
                                               randn(16)], "hardswish", 1 / 6, 0.5,
               padding=(2, 2), stride=(2, 2), groups=16, reduce_len=25),
    fused_conv("depthwise_relu_residual_odd", [randn(2, 7, 9, 11), randn(7, 1, 3, 3), randn(7),
                                               randn(2, 7, 9, 11)], "relu", padding=(1, 1),
               groups=7),
    fused_conv("depthwise_residual_transposed", [randn(1, 12, 6, 6), randn(12, 1, 3, 3),
                                                 absent(),
                                                 randn(1, 12, 6, 6, layout="transposed")],
               "silu", padding=(1, 1), groups=12),
    fused_conv("direct_hardsigmoid_residual", [randn(2, 3, 12, 12), randn(8, 3, 3, 3), randn(8),
                                               randn(2, 8, 10, 10)], "hardsigmoid", 0.2, 0.5,
               reduce_len=27),
    fused_conv("direct_relu6", [randn(1, 5, 9, 9), randn(6, 5, 3, 3), randn(6)], "clamp", 0.0,
               6.0, reduce_len=45),
    fused_conv("direct_sigmoid_residual", [randn(1, 3, 9, 9), randn(4, 3, 3, 3), randn(4),
                                           randn(1, 4, 7, 7)], "sigmoid", reduce_len=27),
    fused_conv("big_stride", [randn(1, 4, 20, 20), randn(20, 4, 3, 3), randn(20),
                              randn(1, 20, 2, 2)], "relu", stride=(9, 9), reduce_len=36),
    fused_conv("unbatched", [randn(8, 10, 10), randn(32, 8, 3, 3), randn(32),
                             randn(32, 10, 10)], "relu", padding=(1, 1), reduce_len=72),
    fused_conv("f64_reference", [randn(1, 3, 6, 6, dtype="float64"),
                                 randn(4, 3, 3, 3, dtype="float64"), randn(4, dtype="float64"),
                                 randn(1, 4, 4, 4, dtype="float64")], "hardswish", 1 / 6, 0.5,
               reduce_len=27),
    # PP-LCNet's scale and shift after the activation: oneDNN's linear
    # post-op, after kiln's epilogue (PaddlePaddle's hardswish), in kiln's
    # depthwise kernel after relu in its stores, in the direct kernel.
    fused_conv("relu_residual_affine_blocked", [randn(1, 8, 10, 10), randn(32, 8, 3, 3),
                                                randn(32), randn(1, 32, 10, 10)], "relu",
               after=(1.5, -0.25), padding=(1, 1), reduce_len=72),
    fused_conv("hardswish_paddle_affine_blocked", [randn(1, 8, 9, 9), randn(24, 8, 3, 3),
                                                   randn(24)], "hardswish", 0.2, 0.5,
               after=(0.75, 0.125), padding=(1, 1), reduce_len=72),
    fused_conv("depthwise_relu_affine", [randn(1, 16, 9, 9), randn(16, 1, 3, 3), randn(16)],
               "relu", after=(2.0, 0.5), padding=(1, 1), groups=16),
    fused_conv("direct_none_affine", [randn(1, 3, 9, 9), randn(6, 3, 3, 3), randn(6)],
               after=(-1.0, 3.0), reduce_len=27),
    fused_conv("f64_hardswish_affine", [randn(1, 3, 6, 6, dtype="float64"),
                                        randn(4, 3, 3, 3, dtype="float64"),
                                        randn(4, dtype="float64")], "hardswish", 1 / 6, 0.5,
               after=(1.25, -0.5), reduce_len=27),
    # leaky_relu with a floor (openwakeword's leaky_relu then maximum): on
    # oneDNN's blocked layout (relu with a slope, then clip), plain 1x1 (kiln's
    # epilogue), kiln's depthwise and direct kernels, float64. A floor far
    # below stands for none (attributes here cannot hold -inf).
    fused_conv("leaky_floor_blocked_residual", [randn(1, 8, 10, 10), randn(32, 8, 3, 3),
                                                randn(32), randn(1, 32, 10, 10)], "leaky_relu",
               0.2, -0.4, padding=(1, 1), reduce_len=72),
    fused_conv("leaky_1x1_plain", [randn(1, 24, 8, 8), randn(32, 24, 1, 1), randn(32)],
               "leaky_relu", 0.1, -1e30, reduce_len=24),
    fused_conv("leaky_depthwise_floor", [randn(1, 16, 9, 9), randn(16, 1, 3, 3), randn(16)],
               "leaky_relu", 0.2, -0.1, padding=(1, 1), groups=16),
    fused_conv("leaky_direct_floor_residual", [randn(1, 3, 9, 9), randn(6, 3, 3, 3), randn(6),
                                               randn(1, 6, 7, 7)], "leaky_relu", 0.3, -0.2,
               reduce_len=27),
    fused_conv("leaky_f64", [randn(1, 3, 6, 6, dtype="float64"),
                             randn(4, 3, 3, 3, dtype="float64"), randn(4, dtype="float64")],
               "leaky_relu", 0.2, -0.4, reduce_len=27),
    Case("conv2d_fused", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), randn(32),
                          randn(1, 32, 1, 1)], name="broadcast_residual",
         attrs={"activation": "relu"},
         error="conv2d_fused: residual of shape [1, 32, 1, 1] is not the output's shape "
               "[1, 32, 8, 8] (it does not broadcast)"),
    Case("conv2d_fused", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), randn(32)],
         name="unknown_activation", attrs={"activation": "gelu"},
         error="conv2d_fused: activation must be one of none, relu, clamp, hardsigmoid, "
               "hardswish, sigmoid, silu, tanh, leaky_relu, got 'gelu'"),
    Case("conv2d_fused", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), absent()],
         name="clamp_bounds", attrs={"activation": "clamp", "alpha": 6.0, "beta": 0.0},
         error="conv2d_fused: clamp's alpha (min) 6 is above its beta (max) 0"),
    Case("conv2d_fused", [randn(1, 8, 10, 10), randn(32, 8, 3, 3), absent(),
                          randn(1, 32, 8, 8, dtype="float64")], name="residual_dtype",
         error="conv2d_fused: residual of dtype float64, the convolution gives float32"),
]


def program(text):
    return {"program": text}


FUSED_ELEMENTWISE = [
    Case("fused_elementwise", [randn(4, 5), randn(4, 5)], lambda x, c: -(torch.sigmoid(x) * c),
         attrs=program("sigmoid(%0) mul($0, %1) neg($1)"), name="chain"),
    Case("fused_elementwise", [randn(3, 7), randn()], lambda x, c: torch.tanh(x * c + x),
         attrs=program("mul(%0, %1) add($0, %0) tanh($1)"), name="scalar_input"),
    Case("fused_elementwise", [randn(20000)], lambda x: torch.cos(torch.sin(x)) * x,
         attrs=program("sin(%0) cos($0) mul($1, %0)"), name="several_blocks"),
    Case("fused_elementwise", [randn(3000)], lambda x: torch.cos(torch.sin(x)) * x,
         attrs=program("sin(%0) cos($0) mul($1, %0)"), name="one_block_with_gradients"),
    Case("fused_elementwise", [randn(5, 6, layout="transposed"), randn(5, 6)],
         lambda a, b: torch.sigmoid(a + b), attrs=program("add(%0, %1) sigmoid($0)"),
         name="strided_input"),
    Case("fused_elementwise", [randn(2, 3, dtype="float64"), randn(2, 3, dtype="float64")],
         lambda a, b: torch.exp(a - b) / b, attrs=program("sub(%0, %1) exp($0) div($1, %1)"),
         name="f64"),
    Case("fused_elementwise", [randn(2, 3)], attrs=program("nope(%0)"), name="unknown_op",
         error="fused_elementwise: bad program \"nope(%0)\": no op 'nope'"),
    Case("fused_elementwise", [randn(2, 3)], attrs=program("neg($0)"), name="result_not_ready",
         error="operand '$0' reads a result not computed yet"),
    Case("fused_elementwise", [randn(2, 3)], attrs=program("leaky_relu(%0)"),
         name="op_with_attributes",
         error="leaky_relu is not an elementwise op without attributes"),
    Case("fused_elementwise", [randn(3, 4), randn(4)], attrs=program("add(%0, %1)"),
         name="broadcast_input",
         error="input 1 of shape [4] is neither the output's shape [3, 4] nor a single element"),
    Case("fused_elementwise", [randn(4, 5), randn(4, 5)], attrs=program("sub(%0, %1) gt($0, %1)"),
         name="intermediate_dtype",
         error="sub (instruction 0) gives float32 but the output is bool"),
    Case("fused_elementwise", [randn(3, 4)], attrs=program("add(%0, %1)"), name="missing_input",
         error="the program reads %1 but the op has 1 inputs"),
]

CASES = (LINEAR_ACT + CONV2D_ACT + CONV2D_FUSED + CONV2D_FUSED_NHWC + MAX_POOL2D_NHWC
         + FUSED_ELEMENTWISE)
