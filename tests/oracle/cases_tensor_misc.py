"""Rows for the elementwise ops with integer semantics (remainder, fmod,
floor_divide, the bitwise ops) and for addcmul / addcdiv: dtypes, type
promotion with Python numbers, broadcasting, layouts, errors, gradients."""
import torch

from oracle import Case, bools, ints, number, randn, uniform, values

INF, NAN = float("inf"), float("nan")

# Divisors with both signs and no zero, so integer rows never divide by 0.
INT_DIVISORS = [[-3, 2, 5, -1], [4, -7, 1, 3], [-2, 6, -5, 7]]
FLOAT_DIVISION_SPECIALS = ([5.0, -5.0, 5.0, -5.0, 0.0, -0.0, INF, 3.0, 3.0, NAN, 7.5, -7.5],
                           [3.0, 3.0, -3.0, -3.0, 2.0, 2.0, 2.0, INF, -INF, 1.0, 0.0, 0.0])

DIVISIONS = {
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "floor_divide": torch.floor_divide,
}

CASES = []
for name, fn in DIVISIONS.items():
    differentiable = name != "floor_divide"  # PyTorch has no derivative for floor_divide
    CASES += [
        Case(name, [randn(3, 4), uniform(0.5, 2, 3, 4)], fn, name="f32", grad=differentiable),
        Case(name, [uniform(-9, 9, 3, 4, dtype="float64", layout="transposed"),
                    uniform(-3, -0.5, 3, 4, dtype="float64", layout="strided")], fn,
             name="f64_negative_divisor", grad=differentiable),
        Case(name, [uniform(-9, 9, 2, 3, 4, dtype="float64", layout="expanded"),
                    uniform(0.5, 3, 4, dtype="float64")], fn, name="f64_broadcast",
             grad=differentiable),
        Case(name, [uniform(-9, 9, 3, 1, dtype="float64"), uniform(0.5, 3, 1, 4, dtype="float64")],
             fn, name="f64_broadcast_both", grad=differentiable),
        Case(name, [values(FLOAT_DIVISION_SPECIALS[0]), values(FLOAT_DIVISION_SPECIALS[1])], fn,
             name="special_f32", fd=False, grad=differentiable),
        Case(name, [ints(-20, 20, 3, 4), values(INT_DIVISORS, dtype="int64")], fn,
             name="int64"),
        Case(name, [ints(-20, 20, 3, 4, dtype="int32", layout="transposed"),
                    values(INT_DIVISORS, dtype="int32", layout="strided")], fn, name="int32"),
        Case(name, [ints(-20, 20, 3, 4, dtype="int32"), values([3, -4, 5, -6], dtype="int64")],
             fn, name="int32_int64_to_int64"),
        Case(name, [values([-2**63, -2**63, 7, -7], dtype="int64"),
                    values([-1, 3, -1, -1], dtype="int64")], fn, name="int64_min_by_minus_one"),
        Case(name, [ints(-20, 20, 3, 4), number(3)], fn, name="int_number"),
        Case(name, [ints(-20, 20, 3, 4), number(-2.5)], fn, name="int_float_number_to_f32"),
        Case(name, [randn(3, 4, dtype="float64"), number(0.75)], fn, name="f64_number",
             grad=differentiable),
        Case(name, [ints(-9, 9, 5), uniform(0.5, 2, 5)], fn, name="int64_f32_to_f32",
             grad=differentiable),
        Case(name, [randn(0, 3), uniform(1, 2, 3)], fn, name="empty", grad=differentiable),
        Case(name, [ints(-5, 5, 4), values([1, 0, 2, 3], dtype="int64")], name="int_by_zero",
             error=f"{name}: ZeroDivisionError"),
        Case(name, [ints(-5, 5, 4, dtype="int32"), number(0)], name="int_by_zero_number",
             error=f"{name}: ZeroDivisionError"),
        Case(name, [bools(3), bools(3)], name="bool", error=f"{name}: not supported for bool"),
        Case(name, [randn(2, 3), randn(4)], name="shape_mismatch",
             error=f"{name}: shapes [2, 3] and [4] cannot be broadcast"),
    ]

# torch.remainder(Scalar, Tensor): a number on the left (PyTorch has no
# derivative for that form, so no gradient rows).
CASES += [
    Case("remainder", [number(7), values(INT_DIVISORS, dtype="int64")], torch.remainder,
         name="number_left"),
    Case("remainder", [number(-7.5), uniform(0.5, 3, 3, 4, dtype="float64")], torch.remainder,
         name="float_number_left", grad=False),
]

BITWISE = {
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
}
for name, fn in BITWISE.items():
    CASES += [
        Case(name, [ints(-100, 100, 3, 4), ints(-100, 100, 3, 4)], fn, name="int64"),
        Case(name, [ints(-100, 100, 4, 3, dtype="int32", layout="transposed"),
                    ints(-100, 100, 3, dtype="int32")], fn, name="int32_broadcast"),
        Case(name, [ints(-100, 100, 2, 3, 4, dtype="int32", layout="expanded"),
                    ints(-100, 100, 4, layout="strided")], fn, name="int32_int64_to_int64"),
        Case(name, [bools(3, 4, layout="strided"), bools(4)], fn, name="bool"),
        Case(name, [bools(3, 4), ints(-3, 3, 3, 4, dtype="int32")], fn, name="bool_int32"),
        Case(name, [ints(-100, 100, 5, dtype="int32"), number(6)], fn, name="int_number"),
        Case(name, [bools(5), number(True)], fn, name="bool_bool_number"),
        Case(name, [bools(5), number(3)], fn, name="bool_int_number_to_int64"),
        Case(name, [values([-2**63, 2**63 - 1, 0, -1], dtype="int64"),
                    values([-1, -1, -1, 2**62], dtype="int64")], fn, name="int64_extremes"),
        Case(name, [ints(0, 5, 0, 3), ints(0, 5, 3)], fn, name="empty"),
        Case(name, [randn(3), randn(3)], name="float",
             error=f"{name}: only integer and bool tensors are supported, got float32"),
        Case(name, [ints(0, 5, 3), number(2.5)], name="int_float_number",
             error=f"{name}: only integer and bool tensors are supported, got float32"),
        Case(name, [ints(0, 5, 2, 3), ints(0, 5, 4)], name="shape_mismatch",
             error=f"{name}: shapes [2, 3] and [4] cannot be broadcast"),
    ]

CASES += [
    Case("bitwise_not", [ints(-100, 100, 3, 4, layout="transposed")], torch.bitwise_not,
         name="int64"),
    Case("bitwise_not", [ints(-100, 100, 5, dtype="int32", layout="strided")], torch.bitwise_not,
         name="int32"),
    Case("bitwise_not", [bools(2, 3, layout="expanded")], torch.bitwise_not, name="bool"),
    Case("bitwise_not", [values([-2**63, 2**63 - 1, 0, -1], dtype="int64")], torch.bitwise_not,
         name="int64_extremes"),
    Case("bitwise_not", [ints(0, 3, 0)], torch.bitwise_not, name="empty"),
    Case("bitwise_not", [randn(3)], name="float",
         error="bitwise_not: only integer and bool tensors are supported, got float32"),
]


def addcmul(value=1):
    return lambda i, a, b: torch.addcmul(i, a, b, value=value)


def addcdiv(value=1):
    return lambda i, a, b: torch.addcdiv(i, a, b, value=value)


CASES += [
    Case("addcmul", [randn(3, 4), randn(3, 4), randn(3, 4)], addcmul(), name="f32"),
    Case("addcmul", [randn(2, 3, 4, dtype="float64", layout="expanded"),
                     randn(3, 4, dtype="float64", layout="transposed"),
                     randn(4, dtype="float64", layout="strided")],
         addcmul(0.5), attrs={"value": 0.5}, name="f64_layouts_value"),
    Case("addcmul", [randn(3, 4, dtype="float64"), randn(3, 1, dtype="float64"),
                     randn(1, 4, dtype="float64")], addcmul(-2), attrs={"value": -2},
         name="f64_broadcast_all"),
    Case("addcmul", [randn(3, 4), randn(4, dtype="float64"), randn(3, 4)], addcmul(),
         name="f32_f64_promote"),
    Case("addcmul", [ints(-5, 5, 3, 4), ints(-5, 5, 3, 4, dtype="int32"), ints(-5, 5, 4)],
         addcmul(3), attrs={"value": 3}, name="int64_value"),
    Case("addcmul", [ints(-5, 5, 3, 4, dtype="int32"), ints(-5, 5, 3, 4, dtype="int32"),
                     ints(-5, 5, 3, 4, dtype="int32")], addcmul(), name="int32"),
    Case("addcmul", [ints(-5, 5, 3, 4), randn(3, 4), ints(-5, 5, 3, 4)], addcmul(0.25),
         attrs={"value": 0.25}, name="int_f32_to_f32"),
    Case("addcmul", [randn(0, 3), randn(3), randn(0, 1)], addcmul(), name="empty"),
    Case("addcmul", [bools(3), bools(3), bools(3)], name="bool",
         error="addcmul: not supported for bool tensors"),
    Case("addcmul", [randn(2, 3), randn(2, 3), randn(4)], name="shape_mismatch",
         error="addcmul: shapes [2, 3] and [4] cannot be broadcast"),
    Case("addcdiv", [randn(3, 4), randn(3, 4), uniform(0.5, 2, 3, 4)], addcdiv(), name="f32"),
    Case("addcdiv", [randn(2, 3, 4, dtype="float64", layout="expanded"),
                     randn(3, 4, dtype="float64", layout="transposed"),
                     uniform(-2, -0.5, 4, dtype="float64", layout="strided")],
         addcdiv(0.5), attrs={"value": 0.5}, name="f64_layouts_value"),
    Case("addcdiv", [randn(3, 4, dtype="float64"), randn(3, 1, dtype="float64"),
                     uniform(0.5, 2, 1, 4, dtype="float64")], addcdiv(-3), attrs={"value": -3},
         name="f64_broadcast_all"),
    # PyTorch's backward fails on an integer input (it casts the gradient to
    # int64), so this row checks values only.
    Case("addcdiv", [ints(-5, 5, 3, 4), randn(3, 4), ints(1, 5, 3, 4)], addcdiv(),
         name="int_input_f32", grad=False),
    Case("addcdiv", [randn(3), values([1.0, 0.0, -1.0]), values([0.0, 0.0, 0.0])], addcdiv(),
         name="by_zero", fd=False),
    Case("addcdiv", [randn(3), ints(1, 5, 3), ints(1, 5, 3)], name="int_division",
         error="addcdiv: integer division with addcdiv is not supported"),
]
