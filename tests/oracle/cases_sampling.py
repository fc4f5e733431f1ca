"""Rows for grid_sample: every mode, padding mode and align_corners, with
grids reaching past [-1, 1] so the padding rules are read. kiln's
grid_sample has no backward rule yet (ops/grid_sample_ops.cpp), so the rows
check values only."""
import torch.nn.functional as F

from oracle import Case, randn, uniform, values

MODES = ["bilinear", "nearest", "bicubic"]
PADDINGS = ["zeros", "border", "reflection"]


def grid_sample_case(mode, padding, align_corners, x, grid, name):
    def fn(inp, g):
        return F.grid_sample(inp, g, mode=mode, padding_mode=padding,
                             align_corners=align_corners)
    return Case("grid_sample", [x, grid], fn,
                attrs={"mode": mode, "padding_mode": padding, "align_corners": align_corners},
                name=name, reduce_len=16 if mode == "bicubic" else 4, grad=False)


CASES = [
    grid_sample_case(mode, padding, align, randn(2, 3, 5, 4), uniform(-1.4, 1.4, 2, 3, 6, 2),
                     f"{mode}_{padding}_{'aligned' if align else 'unaligned'}")
    for mode in MODES for padding in PADDINGS for align in (False, True)
] + [
    grid_sample_case("bicubic", "reflection", False, randn(1, 2, 4, 3, dtype="float64"),
                     uniform(-2.5, 2.5, 1, 5, 4, 2, dtype="float64"), "f64_far_reflection"),
    grid_sample_case("bilinear", "border", True, randn(2, 2, 3, 3, dtype="float64"),
                     uniform(-1.2, 1.2, 2, 4, 4, 2, dtype="float64"), "f64_border"),
    grid_sample_case("bilinear", "zeros", False, randn(2, 3, 4, 5, layout="transposed"),
                     uniform(-1, 1, 2, 3, 3, 2, layout="strided"), "non_contiguous"),
    grid_sample_case("nearest", "zeros", True, randn(1, 1, 3, 3),
                     values([[[[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0], [0.5, -0.5]]]]),
                     "nearest_on_pixel_centers"),
    Case("grid_sample", [randn(2, 3, 4, 4), randn(1, 2, 2, 2)], attrs={"mode": "bilinear"},
         name="batch_mismatch", error="grid of shape [N, OH, OW, 2] with the input's N"),
    Case("grid_sample", [randn(1, 3, 4, 4), randn(1, 2, 2, 2)], attrs={"mode": "area"},
         name="bad_mode", error="mode must be 'bilinear', 'nearest' or 'bicubic'"),
    Case("grid_sample", [randn(3, 4, 4), randn(1, 2, 2, 2)], name="three_d_input",
         error="expected a 4-D input"),
]
