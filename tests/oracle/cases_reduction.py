"""Rows for the reductions (sum, prod, mean, amax, amin, max, min, argmax,
argmin, var, std) and softmax / log_softmax."""
import torch

from oracle import Case, bools, ints, randn, uniform, values

NAN = float("nan")
INF = float("inf")


def _dims(dims):
    """PyTorch's spelling of "every dim" for the ops whose kiln dims list is empty."""
    return None if not dims else tuple(dims)


def _sum(dims=(), keepdim=False, dtype=None):
    torch_dtype = getattr(torch, dtype) if dtype else None
    if not dims:
        return lambda x: torch.sum(x, dtype=torch_dtype).reshape(
            [1] * x.dim() if keepdim else [])
    return lambda x: torch.sum(x, dim=dims, keepdim=keepdim, dtype=torch_dtype)


def _reduce(fn, dims=(), keepdim=False):
    """fn(x, dim, keepdim) for the ops whose empty dims list means every dim."""
    return lambda x: fn(x, dim=_dims(dims), keepdim=keepdim)


def sum_case(x, dims=(), keepdim=False, dtype=None, name="", **kw):
    attrs = {"dims": list(dims), "keepdim": keepdim}
    if dtype:
        attrs["dtype"] = dtype
    return Case("sum", [x], _sum(tuple(dims), keepdim, dtype), attrs=attrs, name=name, **kw)


def dims_case(op, fn, x, dims=(), keepdim=False, name="", **kw):
    return Case(op, [x], _reduce(fn, tuple(dims), keepdim),
                attrs={"dims": list(dims), "keepdim": keepdim}, name=name, **kw)


SUM_CASES = [
    sum_case(randn(3, 4), name="all"),
    sum_case(randn(3, 4), [1], name="last"),
    sum_case(randn(3, 4), [-1], True, name="neg_keepdim"),
    sum_case(randn(3, 4, 5), [0, 2], name="multi"),
    sum_case(randn(3, 4, 5), [2, 0], True, name="multi_keepdim_unsorted"),
    sum_case(randn(2, 3, 4, dtype="float64"), [1], name="f64_middle"),
    sum_case(randn(64, 32), [0], name="columns", reduce_len=64),
    sum_case(randn(5, 6, layout="transposed"), [1], name="transposed_last"),
    sum_case(randn(5, 6, layout="transposed"), [0], name="transposed_first"),
    sum_case(randn(4, 7, layout="strided"), [-1], name="strided"),
    sum_case(randn(4, 9, layout="strided"), [0], name="strided_first"),
    sum_case(randn(3, 4, 5, layout="expanded"), [0, 1], name="expanded"),
    sum_case(randn(3, 4, 5, layout="transposed"), name="transposed_all", reduce_len=60),
    sum_case(ints(-5, 5, 3, 4), [1], name="int64"),
    sum_case(ints(-5, 5, 3, 4, dtype="int32"), [0], name="int32_to_int64"),
    sum_case(bools(4, 5), [1], name="bool"),
    sum_case(bools(4, 5, layout="transposed"), name="bool_all"),
    sum_case(ints(0, 9, 6, dtype="int32"), dtype="float64", name="dtype_f64"),
    sum_case(randn(3, 4), [1], dtype="float64", name="f32_dtype_f64"),
    sum_case(randn(), name="zero_dim"),
    sum_case(randn(), [0], name="zero_dim_dim0"),
    sum_case(randn(), [-1], True, name="zero_dim_keepdim"),
    sum_case(randn(0, 3), [0], name="empty_dim"),
    sum_case(randn(0, 3), [1], name="empty_outputs"),
    sum_case(randn(0, 3), name="empty_all"),
    sum_case(randn(10000), name="large_f32", reduce_len=10000),
    sum_case(uniform(0, 1, 100000), name="large_parallel", reduce_len=100000),
    sum_case(randn(200, 300), [0], name="large_columns", reduce_len=200),
    sum_case(randn(300, 200, layout="transposed"), [1], name="large_transposed", reduce_len=200),
    sum_case(randn(10000, dtype="float64"), name="large_f64", reduce_len=10000),
    Case("sum", [randn(2, 3)], attrs={"dims": [2]}, name="bad_dim",
         error="sum: dim 2 is out of range for a tensor of 2 dims (shape [2, 3])"),
    Case("sum", [randn(2, 3)], attrs={"dims": [1, -1]}, name="duplicate_dims",
         error="dim 1 appears multiple times in the list of dims (shape [2, 3])"),
]

PROD_CASES = [
    Case("prod", [uniform(0.5, 1.5, 3, 4)], lambda x: torch.prod(x, 1), attrs={"dims": [1]}),
    Case("prod", [uniform(0.5, 1.5, 3, 4, layout="transposed")],
         lambda x: torch.prod(x, 0, keepdim=True), attrs={"dims": [0], "keepdim": True},
         name="transposed_keepdim"),
    Case("prod", [ints(-3, 4, 2, 5)], lambda x: torch.prod(x), name="int64_all"),
    Case("prod", [bools(3, 4)], lambda x: torch.prod(x, 1), attrs={"dims": [1]}, name="bool"),
    Case("prod", [randn(0, 2)], lambda x: torch.prod(x, 0), attrs={"dims": [0]}, name="empty"),
    Case("prod", [uniform(0.5, 1.5, 4, 5, dtype="float64")],
         lambda x: x.prod(dim=0).prod(dim=0), attrs={"dims": [0, 1]}, name="f64_multi"),
    # Rows with no, one and two zeros: the gradient is the product of the
    # others (prod is linear in each element, so finite differences hold).
    Case("prod", [values([[1.5, 0.0, 2.0, -1.0], [0.0, 3.0, 0.0, 2.0], [1.0, 2.0, 0.5, 4.0]],
                         dtype="float64")],
         lambda x: torch.prod(x, 1), attrs={"dims": [1]}, name="f64_zeros"),
    Case("prod", [values([[1.5, 0.0, 2.0], [0.5, 3.0, -1.0]])],
         lambda x: torch.prod(x).reshape(1, 1), attrs={"dims": [], "keepdim": True},
         name="one_zero_all_keepdim"),
    Case("prod", [uniform(0.5, 1.5, 3, 4, dtype="float64")], lambda x: torch.prod(x),
         name="f64_all"),
    Case("prod", [randn(dtype="float64")], lambda x: torch.prod(x), name="zero_dim"),
]

MEAN_CASES = [
    dims_case("mean", torch.mean, randn(3, 4)),
    dims_case("mean", torch.mean, randn(3, 4, 5), [0, -1], True, name="multi_keepdim"),
    dims_case("mean", torch.mean, randn(6, 5, dtype="float64", layout="transposed"), [1],
              name="f64_transposed"),
    dims_case("mean", torch.mean, randn(4, 6, layout="strided"), [0], name="strided"),
    dims_case("mean", torch.mean, randn(3, 5, layout="expanded"), [0], name="expanded"),
    dims_case("mean", torch.mean, randn(), name="zero_dim"),
    dims_case("mean", torch.mean, randn(3, 4, dtype="float64"), keepdim=True,
              name="f64_all_keepdim"),
    dims_case("mean", torch.mean, randn(0, 3), [0], name="empty_nan"),
    dims_case("mean", torch.mean, uniform(10, 11, 10000), name="large", reduce_len=10000),
    Case("mean", [ints(0, 9, 5)], lambda x: torch.mean(x, dtype=torch.float64),
         attrs={"dtype": "float64"}, name="int_dtype_f64"),
    Case("mean", [ints(0, 5, 2, 3)], attrs={"dims": [1]}, name="int_error",
         error="mean: could not infer output dtype"),
]

EXTREMUM_CASES = [
    dims_case("amax", torch.amax, randn(3, 4), [1]),
    dims_case("amax", torch.amax, randn(3, 4, 5), [0, 2], True, name="multi_keepdim"),
    dims_case("amax", torch.amax, randn(5, 6, layout="transposed"), [0], name="transposed"),
    dims_case("amax", torch.amax, randn(64, 40, layout="transposed"), [1],
              name="transposed_columns"),
    dims_case("amax", torch.amax, ints(-9, 9, 4, 6, dtype="int32", layout="strided"), [-1],
              name="int32_strided"),
    # Repeated rows: ties, so the gradient is split and FD is off.
    dims_case("amax", torch.amax, randn(3, 4, layout="expanded"), name="expanded_all", fd=False),
    dims_case("amax", torch.amax, values([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype="float64"),
              [1], True, name="ties_keepdim", fd=False),
    dims_case("amax", torch.amax, randn(3, 4, dtype="float64"), name="f64_all"),
    dims_case("amax", torch.amax, bools(3, 4), [1], name="bool"),
    dims_case("amax", torch.amax, values([[1.0, NAN, 3.0], [2.0, 5.0, -INF]]), [1], name="nan",
              fd=False),
    dims_case("amax", torch.amax, values([[1.0, NAN, 3.0], [2.0, 5.0, -INF]]), [0],
              name="nan_columns", fd=False),
    dims_case("amax", torch.amax, randn(), [0], name="zero_dim"),
    dims_case("amax", torch.amax, randn(0, 3), [1], name="empty_outputs"),
    dims_case("amin", torch.amin, randn(3, 4, 5, dtype="float64"), [-2]),
    dims_case("amin", torch.amin, randn(64, 40), [0], name="columns"),
    dims_case("amin", torch.amin, values([[4.0, 2.0, NAN, 1.0]]), name="nan", fd=False),
    dims_case("amin", torch.amin, values([[4.0, 1.0, 2.0, 1.0]]), [1], name="ties", fd=False),
    dims_case("amin", torch.amin, ints(-9, 9, 5, 3, layout="transposed"), [0],
              name="int64_transposed"),
    Case("amax", [randn(0, 3)], attrs={"dims": [0]}, name="empty_error",
         error="amax: expected reduction dim 0 to have non-zero size (shape [0, 3])"),
    Case("amax", [randn(0, 3)], name="empty_all_error",
         error="expected reduction dim to be specified for input.numel() == 0"),
    Case("amin", [randn(2, 3)], attrs={"dims": [-3]}, name="bad_dim",
         error="amin: dim -3 is out of range for a tensor of 2 dims (shape [2, 3])"),
]


def max_case(op, x, dim, keepdim=False, name="", **kw):
    fn = getattr(torch, op)
    return Case(op, [x], lambda t: tuple(fn(t, dim, keepdim=keepdim)),
                attrs={"dim": dim, "keepdim": keepdim}, name=name, **kw)


MAX_MIN_CASES = [
    max_case("max", randn(3, 4), 1),
    max_case("max", randn(3, 4, 5), -2, True, name="keepdim"),
    max_case("max", randn(5, 6, layout="transposed"), 1, name="transposed"),
    max_case("max", randn(4, 6, layout="strided"), 0, name="strided"),
    max_case("max", ints(0, 3, 4, 8), 1, name="int_ties"),
    # NaN, infinities and ties: the gradient goes to the returned index; no FD.
    max_case("max", values([[1.0, 3.0, 3.0, NAN, 2.0, NAN]]), 1, name="nan_first", fd=False),
    max_case("max", values([[-INF, -INF], [INF, INF]]), 1, name="inf_ties", fd=False),
    max_case("max", values([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]]), 1, name="ties", fd=False),
    max_case("max", randn(2, 3, 4, dtype="float64"), 2, name="f64_last"),
    max_case("max", bools(3, 5), 1, name="bool"),
    max_case("max", randn(), 0, name="zero_dim"),
    max_case("max", randn(3, 0), 0, name="empty_outputs"),
    max_case("min", randn(3, 4, dtype="float64"), 0),
    max_case("min", ints(0, 3, 6, 5, dtype="int32", layout="transposed"), 0, name="int_ties"),
    max_case("min", values([[2.0, NAN, 1.0]]), -1, name="nan", fd=False),
    max_case("min", randn(3, 4, layout="expanded"), 0, name="expanded_ties", fd=False),
    max_case("min", randn(4, 3, 2, dtype="float64"), 1, True, name="f64_keepdim"),
    Case("max", [randn(2, 0)], attrs={"dim": 1}, name="empty_error",
         error="max: expected reduction dim 1 to have non-zero size (shape [2, 0])"),
    Case("min", [randn(2, 3)], attrs={"dim": 2}, name="bad_dim",
         error="min: dim 2 is out of range for a tensor of 2 dims (shape [2, 3])"),
]


def arg_case(op, x, dim=None, keepdim=False, name=""):
    fn = getattr(torch, op)
    return Case(op, [x], lambda t: fn(t, dim=dim, keepdim=keepdim),
                attrs={"dim": dim, "keepdim": keepdim}, name=name)


ARG_CASES = [
    arg_case("argmax", randn(3, 4), 1),
    arg_case("argmax", randn(3, 4, 5), -1, True, name="keepdim"),
    arg_case("argmax", randn(5, 6, layout="transposed"), name="flat_transposed"),
    arg_case("argmax", randn(4, 5), keepdim=True, name="flat_keepdim"),
    arg_case("argmax", ints(0, 3, 4, 8, dtype="int32"), 1, name="int_ties"),
    arg_case("argmax", values([[1.0, NAN, 3.0, NAN]]), 1, name="nan"),
    arg_case("argmax", randn(3, 4, layout="expanded"), 0, name="expanded_ties"),
    arg_case("argmax", randn(), name="zero_dim"),
    arg_case("argmin", randn(3, 4, dtype="float64", layout="strided"), 0),
    arg_case("argmin", ints(0, 3, 5, 6), name="flat_int_ties"),
    arg_case("argmin", values([[2.0, 1.0, 1.0]]), -1, name="ties"),
    Case("argmax", [randn(0, 3)], name="empty_error",
         error="expected reduction dim to be specified for input.numel() == 0"),
    Case("argmax", [bools(3)], name="bool_error", error="argmax: does not support bool input"),
]


def var_case(op, x, dims=(), correction=1, keepdim=False, name="", **kw):
    fn = getattr(torch, op)
    return Case(op, [x], lambda t: fn(t, dim=_dims(tuple(dims)), correction=correction,
                                      keepdim=keepdim),
                attrs={"dims": list(dims), "correction": correction, "keepdim": keepdim},
                name=name, **kw)


VAR_STD_CASES = [
    var_case("var", randn(3, 4)),
    var_case("var", randn(3, 4, 5), [0, 2], keepdim=True, name="multi_keepdim"),
    var_case("var", randn(6, 5, dtype="float64", layout="transposed"), [1], 0,
             name="f64_transposed_biased"),
    var_case("var", randn(4, 6, layout="strided"), [0], name="strided"),
    var_case("var", randn(3, 5, layout="expanded"), [0], name="expanded_zero"),
    var_case("var", uniform(1000, 1001, 10000), name="large_offset", reduce_len=10000),
    # No degrees of freedom left: NaN/infinite gradients as PyTorch's; no FD.
    var_case("var", randn(1, 3), [0], name="single_nan", fd=False),
    var_case("var", randn(2, 3), [1], 3, name="correction_over_n", fd=False),
    var_case("var", randn(2, 3, dtype="float64"), [], 6, name="correction_all_f64", fd=False),
    var_case("var", randn(0, 3), [0], name="empty_nan"),
    var_case("var", randn(), name="zero_dim", fd=False),
    var_case("var", randn(3, 4, dtype="float64"), [0], 2, name="f64_correction2"),
    var_case("std", randn(3, 4), [1]),
    var_case("std", randn(4, 5, dtype="float64"), [-1], 0, True, name="f64_biased_keepdim"),
    var_case("std", randn(50, 40, layout="transposed"), [0], name="transposed"),
    var_case("std", randn(3, 4, dtype="float64"), name="f64_all"),
    # Equal rows: std = 0, where the gradient is 0 by convention (a kink): no FD.
    var_case("std", randn(3, 5, layout="expanded"), [0], name="expanded_zero", fd=False),
    Case("var", [ints(0, 5, 4)], name="int_error", error="std and var only support floating"),
    Case("std", [randn(2, 3)], attrs={"dims": [0, 0]}, name="duplicate_dims",
         error="dim 0 appears multiple times"),
]


def softmax_case(op, x, dim, name="", **kw):
    fn = getattr(torch, op)
    return Case(op, [x], lambda t: fn(t, dim), attrs={"dim": dim}, name=name, **kw)


SOFTMAX_CASES = [
    softmax_case("softmax", randn(3, 5), 1),
    softmax_case("softmax", randn(3, 5), 0, name="dim0"),
    softmax_case("softmax", randn(2, 3, 4, dtype="float64"), -2, name="f64_middle"),
    softmax_case("softmax", randn(4, 6, layout="transposed"), -1, name="transposed"),
    softmax_case("softmax", randn(4, 6, layout="strided"), 1, name="strided"),
    softmax_case("softmax", randn(3, 4, layout="expanded"), 0, name="expanded"),
    softmax_case("softmax", values([[1000.0, -1000.0, 999.0], [-1000.0, -1001.0, -999.0]]), 1,
                 name="large_magnitude"),
    softmax_case("softmax", values([[1.0, NAN, 2.0], [1.0, 2.0, 3.0]]), 1, name="nan_row",
                 fd=False),
    softmax_case("softmax", randn(), 0, name="zero_dim"),
    softmax_case("softmax", randn(0, 4), 1, name="empty"),
    softmax_case("softmax", randn(8, 4096), 1, name="long_rows"),
    # Along a dim that is not the last, with at least 8 columns after it:
    # eight rows at once down the columns (YOLOv8's box head), the columns
    # past the last whole vector by the row loop; a NaN, an infinity and a
    # row of -inf among them.
    softmax_case("softmax", randn(2, 5, 3, 11), 1, name="columns"),
    softmax_case("softmax", randn(16, 4, 6), 0, name="columns_dim0"),
    softmax_case("softmax", randn(3, 16, 9, layout="expanded"), 1, name="columns_expanded"),
    softmax_case("softmax", randn(3, 16, 9, layout="expanded"), 0, name="columns_expanded_dim0"),
    softmax_case("softmax", randn(2, 0, 3, 8), 2, name="columns_empty"),
    softmax_case("softmax", values([[[1.0, NAN, 2.0, -INF, 0.5, 1.0, 3.0, -1.0, 2.0],
                                     [2.0, 1.0, INF, -INF, 0.5, 1.0, 3.0, -2.0, 7.0],
                                     [3.0, 0.0, 1.0, -INF, 0.5, 1.0, 3.0, -3.0, 1.0]]]), 1,
                 name="columns_special", fd=False),
    softmax_case("log_softmax", randn(3, 5), 1),
    softmax_case("log_softmax", randn(3, 5, dtype="float64", layout="transposed"), 0,
                 name="f64_transposed"),
    softmax_case("log_softmax", values([[1000.0, -1000.0, 999.0], [-1000.0, -1001.0, -999.0]],
                                       dtype="float64"), -1, name="large_magnitude"),
    softmax_case("log_softmax", randn(), -1, name="zero_dim"),
    softmax_case("log_softmax", randn(4, 3, 2), 1, name="middle"),
    Case("softmax", [ints(0, 5, 3)], attrs={"dim": 0}, name="int_error",
         error="softmax: expected a floating input, got int64"),
    Case("log_softmax", [randn(2, 3)], attrs={"dim": 2}, name="bad_dim",
         error="log_softmax: dim 2 is out of range for a tensor of 2 dims (shape [2, 3])"),
]

CASES = (SUM_CASES + PROD_CASES + MEAN_CASES + EXTREMUM_CASES + MAX_MIN_CASES + ARG_CASES
         + VAR_STD_CASES + SOFTMAX_CASES)
