"""Rows for scatter_reduce with amax and amin (scatter covers sum and prod):
duplicate indices, include_self both ways, a negative dim, an index smaller
than src, integers. kiln's scatter_reduce has no backward rule yet
(ops/scatter_reduce_ops.cpp), so the rows check values only."""
import torch

from oracle import Case, ints, randn, values


def case(name, inputs, dim, reduce, include_self=True, **kw):
    def fn(x, index, src):
        return torch.scatter_reduce(x, dim, index, src, reduce, include_self=include_self)
    return Case("scatter_reduce", inputs, fn,
                attrs={"dim": dim, "reduce": reduce, "include_self": include_self}, name=name,
                grad=False, **kw)


INDEX = values([[0, 2, 2, 1], [2, 2, 0, 0], [1, 0, 2, 2]], dtype="int64")

CASES = [
    case("amax_dim0", [randn(3, 4), INDEX, randn(3, 4)], 0, "amax"),
    case("amin_dim0", [randn(3, 4), INDEX, randn(3, 4)], 0, "amin"),
    case("amax_without_self", [randn(3, 4), INDEX, randn(3, 4)], 0, "amax", include_self=False),
    case("amin_negative_dim", [randn(4, 3), values([[0, 1, 0], [2, 2, 1]], dtype="int64"),
                               randn(2, 3)], -1, "amin"),
    case("amax_index_smaller_than_src", [randn(3, 5, dtype="float64"),
                                         values([[1, 1], [0, 4]], dtype="int64"),
                                         randn(4, 6, dtype="float64")], 1, "amax"),
    case("amin_int", [ints(-5, 5, 3, 4), INDEX, ints(-5, 5, 3, 4)], 0, "amin"),
    case("amax_int32_index", [randn(3, 4), values([[2, 0, 1, 1]], dtype="int32"), randn(1, 4)],
         0, "amax", include_self=False),
    Case("scatter_reduce", [randn(3, 4), INDEX, randn(3, 4)],
         attrs={"dim": 0, "reduce": "mean"}, name="mean_refused",
         error="reduce must be 'amax' or 'amin'"),
    Case("scatter_reduce", [randn(3, 4), values([[3, 0, 0, 0]], dtype="int64"), randn(1, 4)],
         attrs={"dim": 0, "reduce": "amax"}, name="index_out_of_range",
         error="is out of bounds for dimension 0"),
]
