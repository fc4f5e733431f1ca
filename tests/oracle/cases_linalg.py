"""Rows for matmul, linear and addmm. reduce_len is the dot-product length K,
so the float32 atol grows like sqrt(K)."""
import torch
import torch.nn.functional as F

from oracle import Case, absent, bools, ints, randn, values

NAN = float("nan")


def promoted(fn):
    """kiln promotes mixed dtypes (as for add); PyTorch's matmul insists on one
    dtype, so the oracle promotes first."""
    def run(*xs):
        common = xs[0].dtype
        for x in xs[1:]:
            if x is not None:
                common = torch.promote_types(common, x.dtype)
        return fn(*[x if x is None else x.to(common) for x in xs])
    return run


MATMUL = [
    Case("matmul", [randn(3, 4), randn(4, 5)], torch.matmul, name="2d", reduce_len=4),
    Case("matmul", [randn(7), randn(7)], torch.matmul, name="dot_1d", reduce_len=7),
    Case("matmul", [randn(4), randn(4, 3)], torch.matmul, name="1d_2d", reduce_len=4),
    Case("matmul", [randn(3, 4), randn(4)], torch.matmul, name="2d_1d", reduce_len=4),
    Case("matmul", [randn(4), randn(2, 4, 3)], torch.matmul, name="1d_batched", reduce_len=4),
    Case("matmul", [randn(2, 3, 4), randn(4)], torch.matmul, name="batched_1d", reduce_len=4),
    Case("matmul", [randn(2, 3, 4), randn(2, 4, 5)], torch.matmul, name="batched",
         reduce_len=4),
    Case("matmul", [randn(2, 1, 3, 4), randn(5, 4, 2)], torch.matmul, name="broadcast_batch",
         reduce_len=4),
    Case("matmul", [randn(3, 4), randn(2, 2, 4, 5)], torch.matmul, name="broadcast_lhs_2d",
         reduce_len=4),
    Case("matmul", [randn(2, 3, 6, 4), randn(4, 5)], torch.matmul, name="batched_rhs_2d",
         reduce_len=4),
    Case("matmul", [randn(3, 4, layout="transposed"), randn(4, 5, layout="transposed")],
         torch.matmul, name="transposed", reduce_len=4),
    Case("matmul", [randn(3, 4, layout="strided"), randn(4, 5, layout="strided")],
         torch.matmul, name="strided", reduce_len=4),
    Case("matmul", [randn(2, 3, 4, layout="transposed"), randn(2, 4, 5, layout="strided")],
         torch.matmul, name="batched_transposed", reduce_len=4),
    Case("matmul", [randn(3, 4, 5, layout="expanded"), randn(3, 5, 2)], torch.matmul,
         name="expanded_batch", reduce_len=5),
    Case("matmul", [randn(0, 4), randn(4, 5)], torch.matmul, name="empty_rows"),
    Case("matmul", [randn(2, 0, 3, 4), randn(4, 5)], torch.matmul, name="empty_batch"),
    Case("matmul", [randn(3, 0), randn(0, 5)], torch.matmul, name="empty_k"),
    Case("matmul", [randn(8, 512), randn(512, 16)], torch.matmul, name="long_k",
         reduce_len=512),
    Case("matmul", [randn(1, 300), randn(300, 33, layout="transposed")], torch.matmul,
         name="row_times_transposed", reduce_len=300),
    Case("matmul", [randn(3, 4, dtype="float64"), randn(2, 4, 5, dtype="float64")],
         torch.matmul, name="f64", reduce_len=4),
    Case("matmul", [randn(5, dtype="float64"), randn(5, 2, dtype="float64", layout="transposed")],
         torch.matmul, name="f64_1d_transposed", reduce_len=5),
    Case("matmul", [randn(3, 1, 2, 4, dtype="float64"), randn(5, 4, 3, dtype="float64")],
         torch.matmul, name="f64_broadcast_both", reduce_len=4),
    Case("matmul", [randn(2, 1, 4, dtype="float64", layout="strided"),
                    randn(4, dtype="float64")], torch.matmul, name="f64_batched_1d", reduce_len=4),
    Case("matmul", [randn(4, dtype="float64"), randn(3, 1, 4, 2, dtype="float64")], torch.matmul,
         name="f64_1d_broadcast", reduce_len=4),
    Case("matmul", [ints(-5, 5, 3, 4), ints(-5, 5, 4, 2)], torch.matmul, name="i64"),
    Case("matmul", [ints(-5, 5, 2, 3, 4, dtype="int32"), ints(-5, 5, 4, dtype="int32")],
         torch.matmul, name="i32_batched_1d"),
    Case("matmul", [randn(3, 4), randn(4, 2, dtype="float64")], promoted(torch.matmul),
         name="mixed_f32_f64", reduce_len=4),
    Case("matmul", [ints(-3, 3, 3, 4), randn(4, 2)], promoted(torch.matmul),
         name="mixed_i64_f32", reduce_len=4),
    Case("matmul", [randn(), randn(2, 2)], name="zero_dim",
         error="both arguments need to be at least 1D, but they are 0D and 2D"),
    Case("matmul", [randn(2, 3), randn(4, 5)], name="mismatch",
         error="mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    Case("matmul", [randn(3), randn(4)], name="dot_mismatch",
         error="1D tensors expected to have the same size, but got 3 and 4"),
    Case("matmul", [randn(2, 3, 4), randn(3, 4, 5)], name="batch_mismatch",
         error="matmul: shapes [2] and [3]"),
    Case("matmul", [bools(2, 2), bools(2, 2)], name="bool", error="not supported for bool"),
]

LINEAR = [
    Case("linear", [randn(1, 512), randn(256, 512), randn(256)], F.linear, name="w1_512_256_b1",
         reduce_len=512),
    Case("linear", [randn(1, 256), randn(128, 256), randn(128)], F.linear, name="w1_256_128_b1",
         reduce_len=256),
    Case("linear", [randn(1, 128), randn(2, 128), randn(2)], F.linear, name="w1_128_2_b1",
         reduce_len=128),
    Case("linear", [randn(64, 512), randn(256, 512), randn(256)], F.linear,
         name="w1_512_256_b64", reduce_len=512),
    Case("linear", [randn(64, 128), randn(2, 128), randn(2)], F.linear, name="w1_128_2_b64",
         reduce_len=128),
    Case("linear", [randn(1, 37), randn(7, 37), randn(7)], F.linear, name="matvec_ragged",
         reduce_len=37),
    Case("linear", [randn(1, 37), randn(7, 37, layout="strided"), randn(7, layout="strided")],
         F.linear, name="matvec_strided_weight", reduce_len=37),
    Case("linear", [randn(4, 5), randn(3, 5), absent()], F.linear, name="no_bias", reduce_len=5),
    Case("linear", [randn(5), randn(3, 5), randn(3)], F.linear, name="x_1d", reduce_len=5),
    Case("linear", [randn(2, 3, 5), randn(4, 5), randn(4)], F.linear, name="x_3d",
         reduce_len=5),
    Case("linear", [randn(2, 3, 5, layout="transposed"), randn(4, 5), randn(4)], F.linear,
         name="x_3d_transposed", reduce_len=5),
    Case("linear", [randn(4, 5, layout="transposed"), randn(6, 5, layout="transposed"),
                    randn(6, layout="strided")], F.linear, name="transposed", reduce_len=5),
    Case("linear", [randn(1, 64), randn(16, 64, layout="transposed"), randn(16)], F.linear,
         name="b1_transposed_weight", reduce_len=64),
    Case("linear", [randn(0, 5), randn(3, 5), randn(3)], F.linear, name="empty_rows"),
    Case("linear", [randn(2, 0), randn(3, 0), randn(3)], F.linear, name="empty_k"),
    Case("linear", [randn(3, 5, dtype="float64"), randn(4, 5, dtype="float64"),
                    randn(4, dtype="float64")], F.linear, name="f64", reduce_len=5),
    Case("linear", [randn(2, 2, 3, dtype="float64", layout="transposed"),
                    randn(4, 3, dtype="float64", layout="transposed"), absent()], F.linear,
         name="f64_3d_no_bias", reduce_len=3),
    Case("linear", [ints(-4, 4, 3, 5), ints(-4, 4, 2, 5), ints(-4, 4, 2)], F.linear, name="i64"),
    Case("linear", [randn(2, 3), randn(5, 4), randn(5)], name="mismatch",
         error="mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    Case("linear", [randn(2, 3), randn(3), absent()], name="weight_1d",
         error="linear: weight must be 2-D, got shape [3]"),
    Case("linear", [randn(2, 3), randn(4, 3), randn(5)], name="bad_bias",
         error="linear: bias must be 1-D of size 4"),
]

ADDMM = [
    Case("addmm", [randn(2, 4), randn(2, 3), randn(3, 4)], torch.addmm, name="basic",
         reduce_len=3),
    Case("addmm", [randn(2, 4), randn(2, 3), randn(3, 4)],
         lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0),
         attrs={"beta": 0.5, "alpha": 2.0}, name="beta_alpha", reduce_len=3),
    Case("addmm", [randn(4), randn(2, 3, layout="transposed"), randn(3, 4)], torch.addmm,
         name="broadcast_input", reduce_len=3),
    Case("addmm", [values([[NAN] * 4] * 2), randn(2, 3), randn(3, 4)],
         lambda i, a, b: torch.addmm(i, a, b, beta=0.0), attrs={"beta": 0.0},
         name="beta0_ignores_nan", reduce_len=3),
    Case("addmm", [randn(3, 1), randn(3, 0), randn(0, 2)],
         lambda i, a, b: torch.addmm(i, a, b, beta=3.0), attrs={"beta": 3.0}, name="empty_k"),
    Case("addmm", [randn(2, 4, dtype="float64"), randn(2, 3, dtype="float64"),
                   randn(3, 4, dtype="float64", layout="transposed")],
         lambda i, a, b: torch.addmm(i, a, b, beta=2.0, alpha=-1.0),
         attrs={"beta": 2.0, "alpha": -1.0}, name="f64", reduce_len=3),
    Case("addmm", [randn(1, 1, dtype="float64"), randn(3, 2, dtype="float64", layout="strided"),
                   randn(2, 4, dtype="float64")],
         lambda i, a, b: torch.addmm(i, a, b, beta=-0.5, alpha=3.0),
         attrs={"beta": -0.5, "alpha": 3.0}, name="f64_broadcast_scalar_input", reduce_len=2),
    Case("addmm", [ints(-3, 3, 2, 2), ints(-3, 3, 2, 3), ints(-3, 3, 3, 2)],
         lambda i, a, b: torch.addmm(i, a, b, beta=2, alpha=3), attrs={"beta": 2, "alpha": 3},
         name="i64"),
    Case("addmm", [randn(2, 2), randn(2), randn(2, 2)], name="mat1_1d",
         error="addmm: mat1 must be a matrix, got 1-D tensor"),
    Case("addmm", [randn(2, 5), randn(2, 3), randn(4, 5)], name="mismatch",
         error="mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    Case("addmm", [randn(3), randn(2, 3), randn(3, 4)], name="bad_input",
         error="addmm: input of shape [3] can't be broadcast to [2, 4]"),
    Case("addmm", [ints(0, 3, 2, 2), ints(0, 3, 2, 2), ints(0, 3, 2, 2)],
         attrs={"alpha": 0.5}, name="int_fractional_alpha",
         error="beta and alpha must be integers"),
]

CASES = MATMUL + LINEAR + ADDMM
