// cat and stack: copying several same-dtype inputs into stretches of one
// output. Any input layout works; the output may be strided too.
#pragma once

#include <span>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// Input k fills out's positions [start_k, start_k + in_k.shape[dim]) along
// `dim`, one after the other. Inputs without elements are skipped (PyTorch
// lets a 1-D empty tensor join a cat of any rank). All dtypes equal out's.
void concat(const StridedView& out, std::span<const StridedView> inputs, int dim);
// Input k fills out's index k along `dim`; every input has out's shape
// without `dim`.
void stack(const StridedView& out, std::span<const StridedView> inputs, int dim);

}  // namespace kiln::cpu
