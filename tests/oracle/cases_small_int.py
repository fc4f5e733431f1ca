"""Rows for int8, uint8 and int16 (PyTorch's small integer dtypes): the
arithmetic that wraps around, the divisions with PyTorch's sign rules,
comparisons, the bitwise ops and shifts, min/max/clamp, reductions (which
give int64), indexing, joining, views, sorting, max pooling and casts from
floats, including values out of range."""
import torch
import torch.nn.functional as F

from cases_binary import ARITHMETIC
from oracle import Case, bools, ints, number, randn, uniform, values

SMALL = ("int8", "uint8", "int16")
RANGE = {"int8": (-128, 128), "uint8": (0, 256), "int16": (-32768, 32768)}


def full_range(dtype, *shape, layout="contiguous"):
    low, high = RANGE[dtype]
    return ints(low, high, *shape, dtype=dtype, layout=layout)


def nonzero(dtype, *shape):
    """Divisors of both signs (no zero), small enough to leave remainders."""
    vals = [v for v in (-7, -3, -2, -1, 1, 2, 3, 5, 9) if dtype != "uint8" or v > 0]
    n = 1
    for s in shape:
        n *= s
    return values([vals[i % len(vals)] for i in range(n)], dtype=dtype, shape=shape)


BINARY = {
    **ARITHMETIC,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "eq": torch.eq,
    "lt": torch.lt,
    "ge": torch.ge,
}

CASES = []
for dt in SMALL:
    for name, fn in BINARY.items():
        CASES.append(Case(name, [full_range(dt, 3, 4), full_range(dt, 3, 4, layout="transposed")],
                          fn, name=f"{dt}_wraps"))
    CASES += [
        Case("add", [full_range(dt, 2, 3, layout="strided"), full_range(dt, 3)],
             lambda a, b: a + b, name=f"{dt}_broadcast"),
        Case("add", [full_range(dt, 5), number(300)], lambda a, b: a + b,
             name=f"{dt}_int_number_keeps_dtype"),
        Case("mul", [full_range(dt, 5), number(2.5)], lambda a, b: a * b,
             name=f"{dt}_float_number_to_f32"),
        Case("add", [full_range(dt, 4), ints(-9, 9, dtype="int64")], lambda a, b: a + b,
             name=f"{dt}_zero_dim_int64_keeps_dtype"),
        Case("add", [full_range(dt, 4), randn(4)], lambda a, b: a + b, name=f"{dt}_f32"),
        Case("lt", [full_range(dt, 6), number(100)], torch.lt, name=f"{dt}_number"),
        Case("floor_divide", [full_range(dt, 3, 6), nonzero(dt, 3, 6)], torch.floor_divide,
             name=dt),
        Case("remainder", [full_range(dt, 3, 6), nonzero(dt, 3, 6)], torch.remainder, name=dt),
        Case("fmod", [full_range(dt, 3, 6), nonzero(dt, 3, 6)], torch.fmod, name=dt),
        Case("floor_divide", [full_range(dt, 3), values([0, 1, 2], dtype=dt)], name=f"{dt}_by_zero",
             error="floor_divide: ZeroDivisionError"),
        Case("pow", [ints(0, 6, 8, dtype=dt), ints(0, 9, 8, dtype=dt)], torch.pow, name=dt),
        Case("neg", [full_range(dt, 3, 4)], torch.neg, name=dt),
        Case("abs", [full_range(dt, 3, 4)], torch.abs, name=dt),
        Case("sign", [full_range(dt, 3, 4)], torch.sign, name=dt),
        Case("bitwise_not", [full_range(dt, 3, 4, layout="strided")], torch.bitwise_not,
             name=dt),
        Case("clamp", [full_range(dt, 3, 4)], lambda x: torch.clamp(x, 5, 100),
             attrs={"min": 5.0, "max": 100.0}, name=dt),
        Case("where", [bools(3, 4), full_range(dt, 3, 4), full_range(dt, 4)],
             torch.where, name=dt),
        Case("sum", [full_range(dt, 3, 40)], lambda x: torch.sum(x, 1), attrs={"dims": [1]},
             name=f"{dt}_to_int64"),
        Case("sum", [full_range(dt, 3, 4)],
             lambda x, dt=dt: torch.sum(x, 0, dtype=getattr(torch, dt)),
             attrs={"dims": [0], "dtype": dt}, name=f"{dt}_keeps_dtype_wraps"),
        Case("prod", [ints(-3, 4, 3, 5, dtype=dt) if dt != "uint8" else ints(0, 4, 3, 5, dtype=dt)],
             lambda x: torch.prod(x, 1), attrs={"dims": [1]}, name=f"{dt}_to_int64"),
        Case("cumsum", [full_range(dt, 3, 5, layout="transposed")],
             lambda x: torch.cumsum(x, 1), attrs={"dim": 1}, name=f"{dt}_to_int64"),
        Case("mean", [full_range(dt, 3, 4)], attrs={"dims": [1]}, name=f"{dt}_refused",
             error="mean: could not infer output dtype"),
        Case("amax", [full_range(dt, 3, 7)], lambda x: torch.amax(x, 1), attrs={"dims": [1]},
             name=dt),
        Case("argmax", [full_range(dt, 4, 9)], lambda x: torch.argmax(x, 1),
             attrs={"dim": 1}, name=dt),
        Case("max", [full_range(dt, 4, 9)], lambda x: tuple(torch.max(x, 1)),
             attrs={"dim": 1}, name=f"{dt}_dim"),
        Case("sort", [full_range(dt, 3, 20)],
             lambda x: tuple(torch.sort(x, dim=1, descending=True, stable=True)),
             attrs={"dim": 1, "descending": True, "stable": True}, name=dt),
        Case("topk", [full_range(dt, 3, 20)], lambda x: torch.topk(x, 4, 1).values,
             attrs={"k": 4, "dim": 1, "largest": True}, compare_outputs=[0], name=dt),
        Case("gather", [full_range(dt, 3, 4), values([[0, 3], [1, 1], [2, 0]], "int64")],
             lambda x, i: torch.gather(x, 1, i), attrs={"dim": 1}, name=dt),
        Case("index_select", [full_range(dt, 4, 3), values([3, 0, 3], "int64")],
             lambda x, i: torch.index_select(x, 0, i), attrs={"dim": 0}, name=dt),
        Case("scatter", [full_range(dt, 3, 4), values([[2, 0, 1, 2], [0, 1, 2, 0]], "int64"),
                         full_range(dt, 2, 4)],
             lambda x, i, s: torch.scatter(x, 0, i, s), attrs={"dim": 0}, name=dt),
        Case("cat", [full_range(dt, 2, 3), full_range(dt, 4, 3, layout="transposed")],
             lambda a, b: torch.cat([a, b]), name=dt),
        Case("stack", [full_range(dt, 2, 3), full_range(dt, 2, 3, layout="strided")],
             lambda a, b: torch.stack([a, b]), name=dt),
        Case("transpose", [full_range(dt, 2, 3, 4)], lambda x: x.transpose(0, 2),
             attrs={"dim0": 0, "dim1": 2}, name=dt),
        Case("reshape", [full_range(dt, 3, 4, layout="transposed")],
             lambda x: x.reshape(-1, 2), attrs={"shape": [-1, 2]}, name=dt),
        Case("clone", [full_range(dt, 3, 4, layout="strided")], lambda x: x.clone(), name=dt),
        Case("max_pool2d", [full_range(dt, 1, 2, 5, 5)] if dt != "uint8" else
             [full_range(dt, 1, 2, 5, 5)], lambda x: F.max_pool2d(x, 2, 2, 1),
             attrs={"kernel_size": [2], "stride": [2], "padding": [1]}, name=dt),
        # Out-of-range values and NaN too: kiln defines them as PyTorch's x86 build
        # computes them (through int32, then the low bits).
        Case("cast", [values([0.0, 1.9, -1.9, 127.5, 200.7, -129.5, 300.2, 70000.5, 3e9, -1e10,
                              float("inf"), float("nan")])],
             lambda x, dt=dt: x.to(getattr(torch, dt)), attrs={"dtype": dt}, name=f"f32_to_{dt}"),
        Case("cast", [uniform(-300, 300, 4, 5, dtype="float64", layout="transposed")],
             lambda x, dt=dt: x.to(getattr(torch, dt)), attrs={"dtype": dt}, name=f"f64_to_{dt}"),
        Case("cast", [ints(-70000, 70000, 3, 4)], lambda x, dt=dt: x.to(getattr(torch, dt)),
             attrs={"dtype": dt}, name=f"int64_to_{dt}_wraps"),
        Case("cast", [full_range(dt, 3, 4)], lambda x: x.to(torch.float32),
             attrs={"dtype": "float32"}, name=f"{dt}_to_f32"),
    ]

# Promotion across the small types: uint8 with int8 gives int16.
CASES += [
    Case("add", [full_range("uint8", 5), full_range("int8", 5)], lambda a, b: a + b,
         name="uint8_int8_to_int16"),
    Case("mul", [full_range("uint8", 5), full_range("int16", 5)], lambda a, b: a * b,
         name="uint8_int16_to_int16"),
    Case("sub", [full_range("int8", 5), full_range("int16", 5)], lambda a, b: a - b,
         name="int8_int16_to_int16"),
    Case("add", [bools(5), full_range("uint8", 5)], lambda a, b: a + b, name="bool_uint8_to_uint8"),
    Case("maximum", [full_range("uint8", 5), ints(-50, 50, 5, dtype="int32")], torch.maximum,
         name="uint8_int32_to_int32"),
]


def shift_amounts(dtype, n):
    """Counts in range and out of it: negative, the width, beyond."""
    vals = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, -1, -8] if dtype != "uint8" else \
        [0, 1, 2, 3, 7, 8, 9, 15, 16, 200, 255, 4]
    return values([vals[i % len(vals)] for i in range(n)], dtype=dtype)


for dt in SMALL + ("int32", "int64"):
    low, high = RANGE.get(dt, (-1000, 1000))
    for op, fn in (("bitwise_left_shift", torch.bitwise_left_shift),
                   ("bitwise_right_shift", torch.bitwise_right_shift)):
        CASES += [
            Case(op, [ints(low, high, 24, dtype=dt), shift_amounts(dt, 24)], fn, name=dt),
        ]
for op, fn in (("bitwise_left_shift", torch.bitwise_left_shift),
               ("bitwise_right_shift", torch.bitwise_right_shift)):
    CASES += [
        Case(op, [ints(0, 256, 3, 4, dtype="uint8", layout="transposed"),
                  ints(0, 8, 4, dtype="uint8")], fn, name="uint8_broadcast"),
        Case(op, [ints(-100, 100, 5, dtype="int16"), number(3)], fn, name="int16_number"),
        Case(op, [ints(0, 100, 5, dtype="uint8"), ints(0, 5, 5, dtype="int32")], fn,
             name="uint8_int32_to_int32"),
        Case(op, [ints(0, 100, 3, 1, dtype="int64"), ints(0, 5, 3)], fn, name="int64_broadcast"),
        Case(op, [randn(3), ints(0, 3, 3)], name="float",
             error=f"{op}: only integer tensors are supported, got float32"),
        Case(op, [bools(3), bools(3)], name="bools",
             error=f"{op}: only integer tensors are supported, got bool"),
    ]
