// Padding (PyTorch's F.pad) of any dims of a tensor of any dtype, in four
// modes, and its backward. Each output coordinate reads one input
// coordinate per dim (or none: the constant), so one index table per dim
// serves every mode.
#pragma once

#include <cstdint>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

enum class PadMode { Constant, Reflect, Replicate, Circular };

// before[d] / after[d]: elements added (or, when negative, removed) at the
// start / end of dim d, per dim of the input (0 for dims not padded). The
// op has checked them against the sizes for the mode.
struct PadParams {
  int64_t before[kMaxDims] = {};
  int64_t after[kMaxDims] = {};
  PadMode mode = PadMode::Constant;
  double value = 0.0;  // Constant only
};

// The input coordinate output coordinate `o` of a dim of `size` reads, or
// -1 for the constant.
int64_t pad_source(int64_t o, int64_t size, int64_t before, int64_t after, PadMode mode);

// out (contiguous) from x (any strides), any dtype.
void pad(const StridedView& out, const StridedView& x, const PadParams& p);
// dx (contiguous, floating) = the sum of dy's elements over the outputs that
// read each input element (dy any strides).
void pad_backward(const StridedView& dx, const StridedView& dy, const PadParams& p);

}  // namespace kiln::cpu
