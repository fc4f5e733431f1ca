"""Rows for libm's functions (log1p, expm1, log2, log10, reciprocal, erf,
erfc, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh), the binary
atan2, hypot and logaddexp, and scatter."""
import warnings

import torch

from oracle import Case, bools, ints, number, randn, uniform, values

INF, NAN = float("inf"), float("nan")


def within(low, high):
    return lambda *s, **kw: uniform(low, high, *s, **kw)


# Op name -> (PyTorch function, a generator of inputs inside the domain,
# values at its edges: poles, domain ends and beyond (NaN), overflow).
UNARY = {
    "log1p": (torch.log1p, within(-0.9, 5),
              [-1.0, -1.5, -0.0, 0.0, 1e-10, 1e30, INF, -INF, NAN]),
    "expm1": (torch.expm1, randn,
              [-INF, -100.0, -1e-10, 0.0, 1e-10, 50.0, 88.0, 710.0, INF, NAN]),
    "log2": (torch.log2, within(0.05, 5), [0.0, -0.0, -1.0, 1.0, 8.0, 1e-30, 1e30, INF, -INF, NAN]),
    "log10": (torch.log10, within(0.05, 5),
              [0.0, -0.0, -1.0, 1.0, 1000.0, 1e-30, 1e30, INF, -INF, NAN]),
    "reciprocal": (torch.reciprocal, within(0.2, 3),
                   [0.0, -0.0, INF, -INF, NAN, 1e-30, -2.0, 1e30]),
    "erf": (torch.erf, within(-3, 3), [-INF, -6.0, -1e-10, 0.0, 1e-10, 0.5, 6.0, INF, NAN]),
    "erfc": (torch.erfc, within(-3, 3), [-INF, -6.0, 0.0, 0.5, 5.0, 9.0, 30.0, INF, NAN]),
    "tan": (torch.tan, within(-1.4, 1.4), [0.0, -0.0, 1e-10, 1.5, 100.0, INF, -INF, NAN]),
    "asin": (torch.asin, within(-0.95, 0.95), [-1.0, 1.0, 1.5, -1.5, 0.0, -0.0, 0.5, INF, NAN]),
    "acos": (torch.acos, within(-0.95, 0.95), [-1.0, 1.0, 1.5, -1.5, 0.0, -0.0, 0.5, INF, NAN]),
    "atan": (torch.atan, within(-5, 5), [-INF, INF, 0.0, -0.0, 1.0, 1e30, -1e30, NAN]),
    "sinh": (torch.sinh, within(-4, 4), [-INF, INF, 0.0, -0.0, 1e-10, 20.0, -80.0, 1000.0, NAN]),
    "cosh": (torch.cosh, within(-4, 4), [-INF, INF, 0.0, -0.0, 1e-10, 20.0, -80.0, 1000.0, NAN]),
    "asinh": (torch.asinh, within(-5, 5), [-INF, INF, 0.0, -0.0, 1e-10, 1e30, -1e30, NAN]),
    "acosh": (torch.acosh, within(1.05, 5), [1.0, 0.5, -1.0, 2.0, INF, -INF, 1e30, NAN]),
    "atanh": (torch.atanh, within(-0.95, 0.95), [1.0, -1.0, 1.5, 0.0, -0.0, 0.999, 0.5, NAN]),
}

CASES = []
for name, (fn, gen, special) in UNARY.items():
    CASES += [
        Case(name, [gen(3, 5)], fn, name="f32"),
        Case(name, [gen(4, 3, dtype="float64", layout="transposed")], fn, name="f64_transposed"),
        Case(name, [gen(3, 4, layout="strided")], fn, name="f32_strided"),
        Case(name, [gen(3, 4, layout="expanded")], fn, name="f32_expanded"),
        Case(name, [gen(1000)], fn, name="f32_long"),
        Case(name, [ints(0, 6, 2, 3)], fn, name="int64_to_f32"),
        Case(name, [ints(1, 6, 5, dtype="int32")], fn, name="int32_to_f32"),
        Case(name, [bools(4)], fn, name="bool_to_f32"),
        Case(name, [randn(0, 3)], fn, name="empty"),
        Case(name, [gen()], fn, name="zero_dim"),
        # Gradients at the edges are compared with PyTorch's (inf, NaN and
        # all); finite differences there mean nothing (fd=False).
        Case(name, [values(special)], fn, name="special_f32", fd=False),
        Case(name, [values(special, dtype="float64")], fn, name="special_f64", fd=False),
    ]

# Two operands, broadcasting and promoting as PyTorch: atan2 computes
# integers in float32; hypot and logaddexp refuse them.
BINARY = {"atan2": torch.atan2, "hypot": torch.hypot, "logaddexp": torch.logaddexp}
for name, fn in BINARY.items():
    CASES += [
        Case(name, [randn(3, 4), randn(3, 4)], fn, name="f32"),
        Case(name, [randn(3, 1, dtype="float64"),
                    randn(1, 4, dtype="float64", layout="transposed")], fn, name="f64_broadcast"),
        Case(name, [randn(4, 3, layout="strided"), randn(3, layout="contiguous")], fn,
             name="f32_strided_broadcast"),
        Case(name, [randn(3, 4, layout="expanded"), randn(3, 4, dtype="float64")], fn,
             name="f32_f64_to_f64"),
        Case(name, [randn(0, 3), randn(3)], fn, name="empty"),
        Case(name, [randn(), randn()], fn, name="zero_dim"),
        Case(name, [randn(2, 3), randn()], fn, name="tensor_and_zero_dim"),
    ]
CASES += [
    Case("atan2", [ints(-3, 4, 2, 3), ints(-3, 4, 2, 3, dtype="int32")], torch.atan2,
         name="int_to_f32"),
    Case("atan2", [bools(4), bools(4)], torch.atan2, name="bool_to_f32"),
    Case("hypot", [ints(0, 4, 3), ints(0, 4, 3)], name="int",
         error="hypot: not implemented for integer or bool inputs"),
    Case("logaddexp", [ints(0, 4, 3), randn(3, dtype="float64")], torch.logaddexp,
         name="int_f64_to_f64"),
    Case("logaddexp", [ints(0, 4, 3), ints(0, 4, 3)], name="int",
         error="logaddexp: not implemented for integer or bool inputs"),
]

# Signed zeros, infinities and NaN on both sides; logaddexp also at equal
# infinities and where e^x overflows.
EDGE_A = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, -INF, INF, -INF, NAN, 1.0, 2.0, 1000.0]
EDGE_B = [0.0, 0.0, -0.0, -0.0, INF, -INF, 1.0, 1.0, INF, -INF, 1.0, NAN, -INF, 1000.0]
for name, fn in BINARY.items():
    CASES += [
        Case(name, [values(EDGE_A), values(EDGE_B)], fn, name="special_f32", fd=False),
        Case(name, [values(EDGE_A, dtype="float64"), values(EDGE_B, dtype="float64")], fn,
             name="special_f64", fd=False),
    ]


def scatter_reduce(x, dim, index, src, reduce):
    """torch.scatter with reduce=, whose deprecation warning (it points to
    scatter_reduce) is no news to these rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.scatter(x, dim, index, src, reduce=reduce)


def scatter_rows():
    """scatter: replacement (the last write wins where index repeats, as
    PyTorch's CPU loop), the value form, and reduce "add" / "multiply"
    (whose gradients PyTorch does not define, so those rows have none)."""
    distinct = values([[0, 1, 2, 0], [2, 0, 1, 1]], "int64")
    return [
        Case("scatter", [randn(3, 4), distinct, randn(2, 4)],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}),
        Case("scatter", [randn(2, 5, dtype="float64", layout="transposed"),
                         values([[4, 0], [1, 3]], "int64"),
                         randn(2, 3, dtype="float64", layout="strided")],
             # PyTorch's backward wants src no larger than index; the part
             # index never reads is cut off first (the values are the same).
             lambda x, i, s: torch.scatter(x, -1, i, s[:, :2]), attrs={"dim": -1},
             name="index_smaller_than_src_f64"),
        Case("scatter", [randn(4, 3, layout="expanded"), values([[1], [3]], "int32"),
                         randn(2, 1)],
             lambda x, i, s: torch.scatter(x, 0, i.long(), s), attrs={"dim": 0},
             name="i32_expanded"),
        Case("scatter", [randn(2, 3), values([[2, 2, 0]], "int64"), randn(1, 3)],
             lambda x, i, s: torch.scatter(x, 1, i, s), attrs={"dim": 1},
             name="repeated_index_last_wins", grad=False),
        Case("scatter", [randn(3, 4), distinct, number(2.5)],
             lambda x, i, v: torch.scatter(x, 0, i, v), attrs={"dim": 0}, name="value"),
        Case("scatter", [ints(0, 9, 3, 4), distinct, number(7)],
             lambda x, i, v: torch.scatter(x, 0, i, v), attrs={"dim": 0}, name="int_value"),
        Case("scatter", [ints(0, 9, 3, 4, dtype="int32"), distinct,
                         ints(0, 9, 2, 4, dtype="int32")],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}, name="int32"),
        Case("scatter", [bools(3, 4), distinct, bools(2, 4)],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}, name="bool"),
        Case("scatter", [randn(), values(0, "int64"), randn()],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}, name="zero_dim"),
        Case("scatter", [randn(3, 4), values([[]], "int64", shape=(1, 0)), randn(1, 0)],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}, name="empty_index"),
        Case("scatter", [randn(3, 4), distinct, randn(2, 4)],
             lambda x, i, s: scatter_reduce(x, 0, i, s, "add"),
             attrs={"dim": 0, "reduce": "add"}, name="reduce_add", grad=False),
        Case("scatter", [randn(3, 4, dtype="float64"), values([[0, 0, 2, 0]], "int64"),
                         randn(1, 4, dtype="float64")],
             lambda x, i, s: scatter_reduce(x, 0, i, s, "multiply"),
             attrs={"dim": 0, "reduce": "multiply"}, name="reduce_multiply", grad=False),
        Case("scatter", [ints(1, 5, 3, 4), distinct, number(3)],
             lambda x, i, v: scatter_reduce(x, 0, i, v, "multiply"),
             attrs={"dim": 0, "reduce": "multiply"}, name="value_multiply_int", grad=False),
        Case("scatter", [randn(3, 2), values([[3]], "int64"), randn(1, 1)], attrs={"dim": 0},
             name="out_of_range", error="index 3 is out of bounds for dimension 0 with size 3"),
        Case("scatter", [randn(3, 2), values([[0, 1, 0]], "int64"), randn(1, 2)],
             attrs={"dim": 0}, name="index_too_big", error="to be smaller size than src [1, 2]"),
        Case("scatter", [randn(3, 2), values([0], "int64"), randn(1)], attrs={"dim": 0},
             name="rank_mismatch", error="Index tensor must have the same number of dimensions"),
        Case("scatter", [randn(3, 2), values([[0.0]]), randn(1, 1)], attrs={"dim": 0},
             name="float_index", error="scatter: expected an int64 or int32 index tensor"),
        Case("scatter", [randn(3, 2), values([[0]], "int64"), randn(1, 1)],
             attrs={"dim": 0, "reduce": "max"}, name="bad_reduce",
             error="scatter: reduce argument must be either add or multiply, got 'max'"),
    ]


CASES += scatter_rows()
