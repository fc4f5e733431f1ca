// Kernels that walk a tensor along a dim or by position: the running sum and
// product (cumsum, cumprod), flip, roll, and the triangles triu and tril.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class ScanKind { Sum, Prod };

// out[..., i, ...] = in[..., 0, ...] + ... + in[..., i, ...] along dim (or the
// product). out and in have one dtype; floating values accumulate in double
// and integers in int64, as PyTorch's CPU kernels do (so the bits agree). A
// 0-d tensor is its own running sum.
void cumulative(ScanKind kind, const StridedView& out, const StridedView& in, int dim);

// out = in with the given dims reversed (each at most once).
void flip(const StridedView& out, const StridedView& in, std::span<const int> dims);

// out = in rotated by shifts[j] along dims[j] (each dim at most once): the
// element at i goes to (i + shift) mod size.
void roll(const StridedView& out, const StridedView& in, std::span<const int> dims,
          std::span<const int64_t> shifts);

// The upper (triu) or lower triangle of each matrix in the last two dims:
// out[..., i, j] = in[..., i, j] where j - i >= diagonal (triu) or
// j - i <= diagonal (tril), else 0. in has at least two dims.
void triangle(const StridedView& out, const StridedView& in, int64_t diagonal, bool upper);

}  // namespace kiln::cpu
