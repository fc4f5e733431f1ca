"""Rows for the fused ops the fusion passes write: a producer and an
activation as one op (linear_act, conv2d_act), and a chain of elementwise
ops as one (fused_elementwise), against PyTorch running the ops one after
the other."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, ints, randn

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

CASES = LINEAR_ACT + CONV2D_ACT + FUSED_ELEMENTWISE
