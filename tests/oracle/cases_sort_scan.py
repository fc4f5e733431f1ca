"""Rows for the ops that scan, reorder, sort or mask along dims: cumsum,
cumprod, flip, roll, triu, tril, sort, argsort, topk, masked_fill.

Sort rows whose values tie use stable=True on both sides (PyTorch's unstable
sort may order ties either way); topk rows with ties compare values only."""
import torch

from oracle import Case, bools, ints, number, randn, uniform, values

NAN, INF = float("nan"), float("inf")


def _dtype(name):
    return None if name is None else getattr(torch, name)


def cumulative(op, x, dim, dtype=None, name="", **kw):
    fn = getattr(torch, op)
    attrs = {"dim": dim}
    if dtype:
        attrs["dtype"] = dtype
    return Case(op, [x], lambda t: fn(t, dim, dtype=_dtype(dtype)), attrs=attrs, name=name, **kw)


def flip(x, dims, name="", **kw):
    return Case("flip", [x], lambda t: torch.flip(t, dims), attrs={"dims": dims}, name=name, **kw)


def roll(x, shifts, dims=(), name="", **kw):
    fn = (lambda t: torch.roll(t, shifts)) if not dims else (lambda t: torch.roll(t, shifts, dims))
    return Case("roll", [x], fn, attrs={"shifts": list(shifts), "dims": list(dims)}, name=name,
                **kw)


def triangle(op, x, diagonal=0, name="", **kw):
    fn = getattr(torch, op)
    return Case(op, [x], lambda t: fn(t, diagonal), attrs={"diagonal": diagonal}, name=name, **kw)


def sort(x, dim=-1, descending=False, stable=False, name="", **kw):
    return Case("sort", [x], lambda t: tuple(torch.sort(t, dim=dim, descending=descending,
                                                        stable=stable)),
                attrs={"dim": dim, "descending": descending, "stable": stable}, name=name, **kw)


def argsort(x, dim=-1, descending=False, stable=False, name="", **kw):
    return Case("argsort", [x],
                lambda t: torch.argsort(t, dim=dim, descending=descending, stable=stable),
                attrs={"dim": dim, "descending": descending, "stable": stable}, name=name, **kw)


def topk(x, k, dim=-1, largest=True, name="", values_only=False, **kw):
    def fn(t):
        got = torch.topk(t, k, dim, largest)
        return got.values if values_only else tuple(got)
    return Case("topk", [x], fn, attrs={"k": k, "dim": dim, "largest": largest}, name=name,
                compare_outputs=[0] if values_only else None, **kw)


def _topk_unsorted(t):
    # torch's order is unspecified with sorted=False; kiln gives the sorted one.
    v, i = torch.topk(t, 3, 1, sorted=False)
    order = torch.argsort(v, dim=1, descending=True)
    return v.gather(1, order), i.gather(1, order)


CUMULATIVE = [
    cumulative("cumsum", randn(3, 4), 1),
    cumulative("cumsum", randn(3, 4, dtype="float64", layout="transposed"), -2,
               name="neg_dim_f64_transposed"),
    cumulative("cumsum", ints(-5, 5, 3, 4, dtype="int32", layout="strided"), 1,
               name="int32_to_int64_strided"),
    cumulative("cumsum", bools(2, 5), -1, name="bool_to_int64"),
    cumulative("cumsum", randn(4, 3), 0, dtype="float64", name="dtype_f64"),
    cumulative("cumsum", ints(-5, 5, 5), 0, dtype="float32", name="int_dtype_f32"),
    cumulative("cumsum", randn(3, 2, 4, layout="expanded"), 0, name="expanded_dim0"),
    cumulative("cumsum", randn(), 0, name="zero_dim"),
    cumulative("cumsum", randn(), -1, name="zero_dim_neg"),
    cumulative("cumsum", randn(0, 3), 0, name="empty"),
    # Accumulated in double, as PyTorch's CPU kernel: the bits agree.
    cumulative("cumsum", randn(3, 3000), 1, name="long_lines", reduce_len=3000),
    Case("cumsum", [randn(2, 3)], attrs={"dim": 2}, name="bad_dim",
         error="cumsum: dim 2 is out of range"),
    Case("cumsum", [randn(2, 3)], attrs={"dim": -3}, name="bad_neg_dim",
         error="cumsum: dim -3 is out of range"),
    cumulative("cumprod", uniform(0.5, 1.5, 3, 4), 1),
    cumulative("cumprod", uniform(0.5, 1.5, 4, 3, dtype="float64", layout="strided"), -2,
               name="neg_dim_f64_strided"),
    # Zeros: one per line, two in a line, one at the start and one at the end.
    cumulative("cumprod", values([[1.5, 0.0, 2.0, -1.0, 0.0, 3.0], [0.5, 2.0, -1.5, 1.5, -2.0, 0.0],
                                  [0.0, 2.0, 0.5, 1.5, -2.0, 1.0]], "float64"), 1,
               name="zeros_f64"),
    cumulative("cumprod", values([[1.5, 0.0, 2.0], [0.0, 1.5, -1.0], [2.0, -0.5, 0.0],
                                  [0.5, 2.0, 1.0]], layout="transposed"), 0,
               name="zeros_dim0_transposed"),
    cumulative("cumprod", ints(-3, 4, 3, 4), 1, name="int"),
    cumulative("cumprod", ints(-3, 4, 2, 5, dtype="int32"), 0, name="int32_to_int64"),
    cumulative("cumprod", bools(3, 3), 1, name="bool"),
    cumulative("cumprod", uniform(0.5, 1.5, 3, 4), 1, dtype="float64", name="dtype_f64"),
    cumulative("cumprod", randn(), 0, name="zero_dim"),
    cumulative("cumprod", randn(3, 0), 1, name="empty"),
    Case("cumprod", [randn(2, 3)], attrs={"dim": 5}, name="bad_dim",
         error="cumprod: dim 5 is out of range"),
]

REORDER = [
    flip(randn(2, 3, 4), [0, 2]),
    flip(randn(3, 4, dtype="float64", layout="transposed"), [-1], name="neg_dim_f64_transposed"),
    flip(ints(0, 9, 3, 4, layout="strided"), [0, 1], name="int_strided_all"),
    flip(bools(2, 5), [1], name="bool"),
    flip(randn(3, 2, 4, layout="expanded"), [0, -1], name="expanded"),
    flip(randn(2, 3), [], name="no_dims"),
    flip(randn(), [0], name="zero_dim"),
    flip(randn(0, 3), [0, 1], name="empty"),
    Case("flip", [randn(2, 3)], attrs={"dims": [0, -2]}, name="repeated_dim",
         error="flip: dim 0 appears multiple times in the list of dims"),
    Case("flip", [randn(2, 3)], attrs={"dims": [2]}, name="bad_dim",
         error="flip: dim 2 is out of range"),
    roll(randn(3, 4), [1], name="flat"),
    roll(randn(3, 4, dtype="float64", layout="transposed"), [2, -1], [0, 1],
         name="two_dims_f64_transposed"),
    roll(ints(0, 9, 3, 4, layout="strided"), [5], [-1], name="int_strided_past_size"),
    roll(randn(3, 4), [1, 3], [0, 0], name="repeated_dim"),
    roll(randn(3, 4, layout="transposed"), [-3], name="flat_transposed"),
    roll(randn(2, 3, 4, layout="expanded"), [1, -2], [0, 2], name="expanded"),
    roll(bools(2, 5), [-7], [1], name="bool"),
    roll(randn(), [3], name="zero_dim_flat"),
    roll(randn(0, 3), [1], [0], name="empty"),
    Case("roll", [randn(2, 3)], attrs={"shifts": [1, 2], "dims": []}, name="unaligned",
         error="roll: shifts and dimensions must align. shifts: 2, dims:0"),
    Case("roll", [randn(2, 3)], attrs={"shifts": [1, 2], "dims": [0]}, name="unaligned_dims",
         error="roll: shifts and dimensions must align. shifts: 2, dims:1"),
    Case("roll", [randn(2, 3)], attrs={"shifts": [], "dims": []}, name="no_shifts",
         error="roll: `shifts` required"),
    Case("roll", [randn(2, 3)], attrs={"shifts": [1], "dims": [2]}, name="bad_dim",
         error="roll: dim 2 is out of range"),
    Case("roll", [randn()], attrs={"shifts": [1], "dims": [0]}, name="zero_dim_with_dims",
         error="roll: Dimension specified as 0 but tensor has no dimensions"),
    triangle("triu", randn(4, 5)),
    triangle("triu", randn(4, 3, dtype="float64", layout="transposed"), -1,
             name="below_f64_transposed"),
    triangle("triu", randn(2, 3, 4, layout="expanded"), 2, name="batched_expanded"),
    triangle("triu", bools(3, 3), 1, name="bool"),
    triangle("triu", randn(3, 4), 10, name="past_the_corner"),
    triangle("triu", randn(0, 3), name="empty"),
    triangle("tril", randn(4, 5)),
    triangle("tril", randn(2, 3, 4, layout="strided"), 1, name="batched_strided"),
    triangle("tril", ints(0, 9, 5, 3, dtype="int32"), -2, name="int32"),
    triangle("tril", randn(3, 3, dtype="float64"), -10, name="all_zero_f64"),
    Case("triu", [randn(3)], name="one_dim",
         error="triu: input tensor must have at least 2 dimensions"),
    Case("tril", [randn()], name="zero_dim",
         error="tril: input tensor must have at least 2 dimensions"),
]

# Ascending NaNs go last, descending first, as in PyTorch.
_NAN_LINE = [3.0, NAN, 1.0, -INF, NAN, 2.0, INF, -1.0]

SORTING = [
    sort(randn(3, 5)),
    sort(randn(4, 3, dtype="float64", layout="transposed"), 0, True, name="dim0_desc_f64"),
    sort(ints(0, 3, 4, 6), -1, True, True, name="int_ties_stable_desc"),
    sort(ints(0, 3, 5, 4, dtype="int32", layout="strided"), 0, stable=True,
         name="int32_ties_stable_strided"),
    sort(values([_NAN_LINE, _NAN_LINE[::-1]]), stable=True, name="nan", fd=False),
    sort(values([_NAN_LINE, _NAN_LINE[::-1]], "float64"), descending=True, stable=True,
         name="nan_desc_f64", fd=False),
    sort(bools(2, 6), stable=True, name="bool_stable"),
    # Rows repeat along dim 0: every line of dim 0 is one value, tied.
    sort(randn(3, 4, layout="expanded"), 0, stable=True, name="expanded_ties", fd=False),
    sort(randn(2, 3, 4, layout="expanded"), -1, True, name="expanded_last_desc"),
    sort(randn(), name="zero_dim"),
    sort(randn(3, 0), name="empty"),
    sort(randn(64, 600), 1, name="many_lines"),
    Case("sort", [randn(2, 3)], attrs={"dim": 2}, name="bad_dim",
         error="sort: dim 2 is out of range"),
    argsort(randn(4, 5)),
    argsort(randn(4, 3, dtype="float64", layout="strided"), 0, True, name="dim0_desc_f64"),
    argsort(ints(0, 3, 3, 7), stable=True, name="int_ties_stable"),
    argsort(values([_NAN_LINE]), descending=True, stable=True, name="nan_desc"),
    argsort(randn(), name="zero_dim"),
    Case("argsort", [randn(2, 3)], attrs={"dim": -3}, name="bad_dim",
         error="argsort: dim -3 is out of range"),
    topk(randn(3, 6), 2),
    topk(randn(5, 3, dtype="float64", layout="transposed"), 3, 0, False,
         name="dim0_smallest_f64"),
    topk(randn(2, 3, 5, layout="expanded"), 4, -1, name="expanded"),
    topk(ints(0, 4, 3, 8, layout="strided"), 3, name="int_ties_values", values_only=True),
    # Which of two NaNs comes first is unspecified (torch's selection is not
    # stable), so neither the indices nor the gradient are compared.
    topk(values([_NAN_LINE, _NAN_LINE[::-1]]), 3, name="nan_largest", values_only=True,
         grad=False),
    topk(values([_NAN_LINE, _NAN_LINE[::-1]]), 3, largest=False, name="nan_smallest", fd=False),
    topk(randn(3, 4), 0, name="k_zero"),
    topk(randn(3, 4, dtype="float64"), 4, name="k_all_f64"),
    topk(randn(), 1, name="zero_dim"),
    Case("topk", [randn(4, 6)], _topk_unsorted, attrs={"k": 3, "dim": 1, "sorted": False},
         name="unsorted"),
    Case("topk", [randn(2, 3)], attrs={"k": 4}, name="k_too_big",
         error="topk: selected index k out of range"),
    Case("topk", [randn(2, 3)], attrs={"k": -1}, name="k_negative",
         error="topk: selected index k out of range"),
    Case("topk", [randn(2, 3)], attrs={"k": 1, "dim": 2}, name="bad_dim",
         error="topk: dim 2 is out of range"),
    Case("topk", [bools(2, 3)], attrs={"k": 1}, name="bool",
         error="topk does not support bool dtypes"),
]

MASKED_FILL = [
    Case("masked_fill", [randn(3, 4), bools(3, 4), number(2.5)],
         lambda x, m, v: torch.masked_fill(x, m, v)),
    Case("masked_fill", [randn(3, 4, dtype="float64", layout="transposed"), bools(4),
                         number(-1.0)],
         lambda x, m, v: torch.masked_fill(x, m, v), name="broadcast_mask_f64_transposed"),
    # Out of place the input broadcasts too: its gradient sums over the rows.
    Case("masked_fill", [randn(4), bools(3, 4), number(0.0)],
         lambda x, m, v: torch.masked_fill(x, m, v), name="broadcast_input"),
    Case("masked_fill", [randn(2, 5), bools(2, 5, layout="strided"), randn()],
         lambda x, m, v: torch.masked_fill(x, m, v), name="tensor_value"),
    Case("masked_fill", [randn(3, 2, 4, layout="expanded"), bools(2, 1), randn(dtype="float64")],
         lambda x, m, v: torch.masked_fill(x, m, v), name="f64_value_expanded"),
    Case("masked_fill", [ints(0, 9, 3, 4, dtype="int32"), bools(3, 4), number(2.7)],
         lambda x, m, v: torch.masked_fill(x, m, v), name="int32_float_value"),
    Case("masked_fill", [bools(2, 3), bools(2, 3), number(True)],
         lambda x, m, v: torch.masked_fill(x, m, v), name="bool"),
    Case("masked_fill", [randn(), values(True, "bool"), number(3)],
         lambda x, m, v: torch.masked_fill(x, m, v), name="zero_dim"),
    Case("masked_fill", [randn(2, 3), ints(0, 2, 2, 3), number(1.0)], name="int_mask",
         error="masked_fill: only supports boolean masks, but got mask with dtype int64"),
    Case("masked_fill", [randn(2, 3), bools(2, 3), randn(1)], name="value_1d",
         error="masked_fill: only supports a 0-dimensional value tensor, but got tensor with 1 "
               "dimension(s)"),
    Case("masked_fill", [randn(2, 3), bools(2, 2), number(1.0)], name="not_broadcastable",
         error="masked_fill: shapes [2, 3] and [2, 2] cannot be broadcast"),
]

CASES = CUMULATIVE + REORDER + SORTING + MASKED_FILL
