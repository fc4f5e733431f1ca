"""Rows for the two- and three-input elementwise ops: arithmetic, pow,
maximum/minimum, comparisons and where, with broadcasting and type promotion."""
import torch

from oracle import Case, bools, ints, number, randn, uniform, values

INF, NAN = float("inf"), float("nan")

ARITHMETIC = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}

# Rows every arithmetic op gets: layouts, broadcasting (incl. 0-d tensors and
# Python numbers), type promotion, empty tensors, and a shape error.
CASES = []
for name, fn in ARITHMETIC.items():
    is_number_op = name not in ("maximum", "minimum")  # torch.maximum takes no Python number
    CASES += [
        Case(name, [randn(3, 4), randn(3, 4)], fn, name="f32"),
        Case(name, [randn(3, 4, dtype="float64", layout="transposed"),
                    randn(3, 4, dtype="float64", layout="strided")], fn, name="f64_layouts"),
        Case(name, [randn(2, 3, 4, layout="expanded"), randn(4)], fn, name="expanded_broadcast"),
        Case(name, [randn(3, 1), randn(1, 4)], fn, name="broadcast_outer"),
        Case(name, [randn(2000), randn(2000)], fn, name="f32_long"),
        Case(name, [randn(), randn(2, 3)], fn, name="zero_dim_left"),
        Case(name, [randn(2, 3), randn(dtype="float64")], fn, name="zero_dim_f64_keeps_f32"),
        Case(name, [ints(-5, 5, 3, 4), uniform(0.5, 2, 3, 4)], fn, name="int64_f32_to_f32"),
        Case(name, [ints(1, 9, 3, 4, dtype="int32"), ints(1, 9, 4)], fn,
             name="int32_int64_to_int64"),
        Case(name, [randn(0, 3), randn(3)], fn, name="empty"),
        Case(name, [randn(2, 3), randn(4)], name="shape_mismatch",
             error=f"{name}: shapes [2, 3] and [4] cannot be broadcast"),
    ]
    if is_number_op:
        CASES += [
            Case(name, [randn(3, 4), number(2.5)], fn, name="f32_number"),
            Case(name, [ints(1, 9, 5, dtype="int32"), number(3)], fn, name="int32_int_number"),
            Case(name, [ints(1, 9, 5, dtype="int32"), number(2.5)], fn,
                 name="int32_float_number_to_f32"),
            Case(name, [number(2.0), randn(2, 3, dtype="float64", layout="transposed")], fn,
                 name="number_left"),
        ]

CASES += [
    Case("add", [bools(3, 4), bools(3, 4)], lambda a, b: a + b, name="bool_is_or"),
    Case("add", [bools(4), randn(3, 4)], lambda a, b: a + b, name="bool_f32"),
    Case("mul", [bools(3, 4), bools(4)], lambda a, b: a * b, name="bool_is_and"),
    Case("mul", [bools(5), number(3)], lambda a, b: a * b, name="bool_int_number_to_int64"),
    Case("sub", [bools(3), bools(3)], name="two_bools",
         error="sub: subtraction, the `-` operator, with two bool tensors is not supported"),
    Case("sub", [ints(0, 3, 3), bools(3)], name="int_bool",
         error="sub: subtraction, the `-` operator, with a bool tensor is not supported"),
    Case("div", [ints(-9, 9, 3, 4), ints(1, 4, 3, 4)], lambda a, b: a / b, name="int_is_true_div"),
    Case("div", [bools(4), bools(4)], lambda a, b: a / b, name="bools_to_f32"),
    # Infinite and NaN gradients (compared with PyTorch's); no finite differences there.
    Case("div", [values([1.0, -1.0, 0.0, NAN]), values([0.0, 0.0, 0.0, 1.0])],
         lambda a, b: a / b, name="by_zero", fd=False),
    Case("div", [ints(-3, 3, 4), values([0, 0, 0, 0], dtype="int64")], lambda a, b: a / b,
         name="int_by_zero"),
    Case("maximum", [values([NAN, 1.0, NAN, -INF]), values([1.0, NAN, NAN, INF])],
         torch.maximum, name="nan", fd=False),
    Case("minimum", [values([NAN, 1.0, NAN, -INF]), values([1.0, NAN, NAN, INF])],
         torch.minimum, name="nan", fd=False),
    # Ties split the gradient in half (PyTorch's convention); a tie is a kink,
    # so no finite differences.
    Case("maximum", [values([1.0, 2.0, -3.0, 0.5], dtype="float64"),
                     values([1.0, 1.0, -3.0, 2.0], dtype="float64")], torch.maximum,
         name="ties", fd=False),
    Case("minimum", [values([[1.0, 2.0], [-3.0, 0.5]]), values([2.0, 0.5])], torch.minimum,
         name="ties_broadcast", fd=False),
    Case("sub", [randn(4, 1, 3, dtype="float64"), randn(5, 1, dtype="float64")],
         lambda a, b: a - b, name="f64_broadcast_both"),
    Case("div", [randn(4, 1, 3, dtype="float64"), uniform(0.5, 2, 5, 1, dtype="float64")],
         lambda a, b: a / b, name="f64_broadcast_both"),
    Case("maximum", [bools(3, 4), bools(4)], torch.maximum, name="bool"),
    Case("minimum", [bools(3, 4), bools(4)], torch.minimum, name="bool"),
]



def add_alpha(alpha):
    return lambda a, b: torch.add(a, b, alpha=alpha)


# add and sub with alpha (add_scaled, Note [Add with alpha]): rounded once,
# as PyTorch's kernel rounds it, so the rows ask for the same bits.
EXACT = dict(rtol=0.0, atol=0.0)
CASES += [
    Case("add_scaled", [randn(3, 4), randn(3, 4)], add_alpha(0.1), attrs={"alpha": 0.1},
         name="f32", **EXACT),
    Case("add_scaled", [randn(2000), randn(2000)], add_alpha(-0.7), attrs={"alpha": -0.7},
         name="f32_long", **EXACT),
    Case("add_scaled", [randn(3, 4, dtype="float64", layout="transposed"),
                        randn(3, 4, dtype="float64", layout="strided")], add_alpha(-2.5),
         attrs={"alpha": -2.5}, name="f64_layouts", **EXACT),
    Case("add_scaled", [randn(2, 3, 4, layout="expanded"), randn(4)], add_alpha(0.3),
         attrs={"alpha": 0.3}, name="expanded_broadcast", **EXACT),
    Case("add_scaled", [randn(3, 1), randn(1, 4)], add_alpha(3), attrs={"alpha": 3},
         name="broadcast_outer", **EXACT),
    Case("add_scaled", [ints(-5, 5, 3, 4), randn(3, 4)], add_alpha(0.5), attrs={"alpha": 0.5},
         name="int64_f32_to_f32", **EXACT),
    # With a Python number for b, PyTorch's scalar loop (its last n % 16
    # elements, so all 12 here) rounds twice; kiln rounds once everywhere.
    Case("add_scaled", [randn(3, 4), number(2.5)], add_alpha(0.1), attrs={"alpha": 0.1},
         name="f32_number"),
    Case("add_scaled", [randn(2, 3), randn(dtype="float64")], add_alpha(1.5),
         attrs={"alpha": 1.5}, name="zero_dim_f64_keeps_f32", **EXACT),
    Case("add_scaled", [randn(0, 3), randn(3)], add_alpha(2.0), attrs={"alpha": 2.0},
         name="empty"),
    # alpha as a 0-d tensor (a compiled step's learning rate), cast to the
    # result's dtype as PyTorch casts the number.
    Case("add_scaled", [randn(3, 4), randn(3, 4), randn(dtype="float64")],
         lambda a, b, s: torch.add(a, b, alpha=float(s)), name="alpha_tensor", grad=False,
         **EXACT),
    Case("add_scaled", [ints(-5, 5, 3, 4), ints(-5, 5, 3, 4)], name="integral",
         error="add_scaled: computes in a floating dtype, got int64"),
    Case("add_scaled", [randn(3), randn(3), randn(2)], name="alpha_not_0d",
         error="add_scaled: alpha as a tensor must be 0-d, got shape [2]"),
    Case("add_scaled", [randn(2, 3), randn(4)], name="shape_mismatch",
         error="add_scaled: shapes [2, 3] and [4] cannot be broadcast"),
]

def pow_fn(a, b):
    return torch.pow(a, b)


CASES += [
    Case("pow", [uniform(0.1, 3, 3, 4), uniform(-2, 2, 3, 4)], pow_fn, name="f32"),
    Case("pow", [uniform(0.1, 3, 4, 3, dtype="float64", layout="transposed"),
                 uniform(-2, 2, 3, dtype="float64")], pow_fn, name="f64_broadcast"),
    Case("pow", [randn(3, 4, layout="strided"), number(2)], pow_fn, name="square"),
    # A square by a tensor exponent (ONNX Pow by a constant 2) runs as x * x:
    # -0, infinities, NaN, overflow and underflow as pow gives them.
    Case("pow", [values([[0.0, -0.0, float("inf"), float("-inf"), float("nan"), 3e20, -1.5e-23,
                          -7.25]]), values(2.0)], pow_fn, name="square_tensor_exponent", fd=False),
    Case("pow", [uniform(0.1, 3, 2, 3, 5, layout="transposed"), values([2.0])], pow_fn,
         name="square_broadcast_exponent"),
    Case("pow", [uniform(0, 4, 3, 4), number(0.5)], pow_fn, name="sqrt_number"),
    Case("pow", [number(2.0), uniform(-3, 3, 5)], pow_fn, name="number_base"),
    Case("pow", [number(2), ints(0, 10, 5)], pow_fn, name="int_number_base"),
    Case("pow", [ints(-4, 5, 3, 4), ints(0, 5, 3, 4)], pow_fn, name="int64"),
    Case("pow", [values([2, 1, -1, -1, 0, 3], dtype="int64"),
                 values([-1, -2, -3, -2, 0, 0], dtype="int64")], pow_fn, name="int_negative_exp"),
    Case("pow", [ints(-4, 5, 6, dtype="int32"), number(3)], pow_fn, name="int32_cube"),
    Case("pow", [ints(1, 5, 6), number(2.5)], pow_fn, name="int_float_number_to_f32"),
    # NaN and infinite gradients, compared with PyTorch's; no finite differences.
    Case("pow", [values([-2.0, 0.0, 0.0, NAN, 1.0, INF]), values([0.5, -1.0, 0.0, 0.0, NAN, -1.0])],
         pow_fn, name="special", fd=False),
    # Base 0: no gradient to the base where the exponent is 0 and none to the
    # exponent where it is >= 0 (PyTorch's conventions); x^0.5 has no
    # derivative at 0 and x^b is undefined left of it, so no finite differences.
    Case("pow", [values([0.0, 0.0, 0.0, 0.0, 2.0], dtype="float64"),
                 values([2.0, 0.0, 0.5, 1.0, 0.0], dtype="float64")], pow_fn, name="base_zero",
         fd=False),
    Case("pow", [uniform(0.5, 2, 3, 1, dtype="float64"), uniform(-2, 2, 4, dtype="float64")],
         pow_fn, name="f64_broadcast_both"),
    Case("pow", [randn(3, 4, dtype="float64"), number(3)], pow_fn, name="f64_cube"),
    Case("pow", [randn(0, 2), randn(2)], pow_fn, name="empty"),
    Case("pow", [bools(3), bools(3)], name="bools", error="pow: not supported for bool inputs"),
]

COMPARISONS = {
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
}
for name, fn in COMPARISONS.items():
    CASES += [
        # Small integer values so equality actually happens.
        Case(name, [ints(-2, 3, 3, 4, dtype="float32"), ints(-2, 3, 3, 4, dtype="float32")], fn,
             name="f32", grad=False),
        Case(name, [ints(-2, 3, 4, 3, dtype="float64", layout="transposed"),
                    ints(-2, 3, 3, dtype="float64")], fn, name="f64_broadcast", grad=False),
        Case(name, [ints(-2, 3, 2, 3, 4, layout="expanded"), number(1)], fn, name="int_number",
             grad=False),
        Case(name, [ints(-2, 3, 5, dtype="int32"), number(0.5)], fn, name="int_float_number",
             grad=False),
        Case(name, [ints(-2, 3, 3, 4, layout="strided"), ints(-2, 3, 3, 4, dtype="float32")],
             fn, name="int_vs_f32", grad=False),
        Case(name, [values([NAN, NAN, 1.0, -INF]), values([NAN, 1.0, 1.0, INF])], fn,
             name="nan", grad=False),
        Case(name, [bools(3, 4), bools(4)], fn, name="bool", grad=False),
        Case(name, [randn(0), randn()], fn, name="empty", grad=False),
        Case(name, [randn(3), randn(2)], name="shape_mismatch",
             error=f"{name}: shapes [3] and [2] cannot be broadcast"),
    ]


def where_fn(c, a, b):
    return torch.where(c, a, b)


CASES += [
    Case("where", [bools(3, 4), randn(3, 4), randn(3, 4)], where_fn, name="f32"),
    Case("where", [bools(3, 1), randn(4, dtype="float64"),
                   randn(2, 3, 4, dtype="float64", layout="expanded")], where_fn,
         name="broadcast_all_three"),
    Case("where", [bools(4, 3, layout="transposed"), randn(4, 3, layout="strided"), number(0.0)],
         where_fn, name="number_operand"),
    Case("where", [bools(5), ints(0, 9, 5, dtype="int32"), number(2)], where_fn,
         name="int32_int_number"),
    Case("where", [bools(5), ints(0, 9, 5), randn(5)], where_fn, name="int64_f32_to_f32"),
    Case("where", [bools(2, 2), bools(2, 2), bools(2, 2)], where_fn, name="bools", grad=False),
    Case("where", [bools(0, 2), randn(2), randn(0, 2)], where_fn, name="empty"),
    Case("where", [bools(3, 4), randn(4, dtype="float64"), randn(3, 1, dtype="float64")],
         where_fn, name="f64_broadcast_grads"),
    Case("where", [ints(0, 2, 3), randn(3), randn(3)], name="int_condition",
         error="where: expected condition to be a bool tensor, but got a tensor with dtype int64"),
    Case("where", [bools(3), randn(2), randn(3)], name="shape_mismatch",
         error="where: shapes [3] and [2] cannot be broadcast"),
]
