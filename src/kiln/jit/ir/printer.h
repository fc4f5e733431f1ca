// The IR's text form, LLVM/TorchScript-like and read back by parse_graph
// (parser.h) exactly:
//
//   graph(%x : f32[1, 512]) {
//     %fc1.weight : f32[256, 512] = param
//     %fc1.bias : f32[256] = param
//     %c0 : f32[2] = const [0.5, -inf]
//     %c1 : f64[] = number 2.5
//     %0 : f32[1, 256] = linear(%x, %fc1.weight, %fc1.bias)
//     %1 : f32[] = cast(%c1) {dtype=f32}
//     %2 : f32[1, 256] = add(%0, %1)
//     %3 : f32[1], %4 : i64[1] = max(%2) {dim=1, keepdim=false}
//     return (%3, %4)
//   }
//
// - Types are a short dtype name (f32 f64 i32 i64 bool) and a shape. A dim
//   of a graph with symbolic sizes (core/dim.h) is its size expression, as
//   parse_size_expr reads it: %x : f32[batch, 512], f32[2*batch, (h - 3) // 2 + 1];
//   so are int and int[] attributes that hold one: {shape=[batch, -1]},
//   {end=seq // 2}. Constants have static shapes.
// - Inputs and parameters print by name (parameters by their state_dict
//   names); a name that is not made of [A-Za-z0-9_.], or that looks like a
//   generated one, is quoted: %"my input". An unnamed input is %in<k>.
// - Constants are %c<k>, with their data inline, nested by the shape (numbers
//   as std::to_chars writes them, so they read back bit for bit). A `number`
//   is a constant that stands for a Python number (wrapped_number: it does
//   not decide the dtype of the ops it meets). A constant with more elements
//   than PrintOptions allows prints as `const <1000 x f32>`: readable, but the
//   parser refuses it.
// - A control-flow node's blocks follow it, one level deeper, each named by
//   the op and written as a graph of its own (own names, closed: what it
//   reads from outside comes in as its inputs):
//       %3 : f32[4] = cond(%2, %x)
//         then graph(%x : f32[4]) {
//           %0 : f32[4] = neg(%x)
//           return (%0)
//         }
//         else graph(%x : f32[4]) {
//           return (%x)
//         }
// - Node outputs are %0, %1, ... in print order; an absent optional input is
//   `none`; every attribute is printed, in the op's declared order (None for
//   an unset optional one).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

struct PrintOptions {
  // Constants with more elements than this print elided.
  int64_t constant_limit = 16;
  // Print every constant in full, whatever its size (for text that must
  // parse back).
  bool full = false;
};

std::string to_text(const Graph& graph, const PrintOptions& options = {});
std::ostream& operator<<(std::ostream& os, const Graph& graph);

// A constant's data as the text form writes it: "2.5", "[[1, 2], [3, 4]]",
// or "<1000 x f32>" when it has more than `limit` elements (no limit when
// negative).
std::string constant_data_to_text(const Tensor& data, int64_t limit = -1);

}  // namespace kiln::jit
