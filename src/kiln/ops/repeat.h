// Repeating a tensor's elements, with PyTorch's names: Tensor.repeat (tile
// the whole tensor), tile, and repeat_interleave with one repeat count
// (each element in turn). repeat_interleave with a tensor of counts gives an
// output whose size depends on the counts' values: it is in
// data_dependent.h.
//
// None of these is an op of the table: each is a view that inserts size-1
// dims, an expand (stride 0, no copy) and one reshape that copies, so each
// gets its gradient (expand's sum), tracing with symbolic sizes and ONNX
// export from those ops, and costs the one copy a kernel of its own would.
#pragma once

#include <optional>

#include "kiln/core/tensor.h"

namespace kiln {

// x tiled repeats[i] times along dim i; repeats may have more entries than
// x has dims (new leading dims), not fewer. Always a new tensor.
Tensor repeat(const Tensor& x, const IntList& repeats);
// repeat, with dims padded by leading 1s when shorter than x's dims.
Tensor tile(const Tensor& x, const IntList& dims);
// Each element (dim unset: of the flattened x) or each slice along dim,
// `repeats` times in a row. output_size, when given, must be the result's
// size along dim.
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);

}  // namespace kiln
