// Sizes as a trace with dynamic shapes sees them. Outside such a trace these
// are t.shape() as Dims; inside one, the dims the recording made symbolic
// come back as expressions (`batch`, `seq // 2`), so code that computes a
// new shape from an old one records a graph that stays general:
//
//   DimList s = sym_shape(x);                       // [batch, seq, 512]
//   Tensor heads = reshape(x, {s[0], s[1], 8, 64});  // view {shape=[batch, seq, 8, 64]}
//
// Code that needs a plain integer asks size_as_int: a symbolic size is then
// fixed to its value in the call being traced, by a guard the compiled
// graph checks on every call, and the trace reports where it happened.
#pragma once

#include <source_location>

#include "kiln/core/dim.h"

namespace kiln {

class Tensor;

DimList sym_shape(const Tensor& t);
Dim sym_size(const Tensor& t, int64_t dim);
Dim sym_numel(const Tensor& t);

// The integer value of `size`. A symbolic one takes its value in the trace
// being recorded, which is specialized to it (`what` names the reading,
// "int()", in the report); an error outside a trace.
int64_t size_as_int(const Dim& size, const char* what,
                    std::source_location where = std::source_location::current());

}  // namespace kiln
