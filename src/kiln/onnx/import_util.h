// Small pieces the ONNX op translators share (import_ops.cpp,
// import_math.cpp, import_shape_ops.cpp): an input's rank, a wrapped axis,
// binding a node's output, and the one-op unary and binary translations.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "kiln/onnx/import_context.h"

namespace kiln::onnx {

using Table = std::unordered_map<std::string, ImportFn>;

inline int64_t rank_of(const jit::Value* value) {
  return int64_t(value->shape().size());
}

// ONNX's negative axes count from the end.
inline int64_t wrap(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

inline void define(const pb::NodeProto& node, ImportContext& c, jit::Value* value, int i = 0) {
  c.define(node.output(i), value);
}

// A node that is one kiln op of the same inputs: Op(x) or Op(a, b).
template <const char* Op>
void unary(const pb::NodeProto& node, ImportContext& c) {
  define(node, c, c.emit(Op, {c.input(node, 0)}));
}

template <const char* Op>
void binary(const pb::NodeProto& node, ImportContext& c) {
  define(node, c, c.emit(Op, {c.input(node, 0), c.input(node, 1)}));
}

}  // namespace kiln::onnx
