// Graphs the IR tests share.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

inline TensorMeta meta(DType dtype, IntList shape) {
  return TensorMeta{dtype, std::move(shape)};
}

// W1's first layers: linear, relu, a wrapped number, a reduction with two
// outputs, a linear without bias; parameters by state_dict name.
std::unique_ptr<Graph> small_mlp();

// One row of the op test table as a graph: the row's op over graph inputs
// (or, with `inputs_as_constants`, over constants holding the row's data),
// with a cast node in front of every input whose dtype the kernel does not
// take, as the tracer records them. Wrapped numbers are always constants.
std::unique_ptr<Graph> graph_of_row(const nlohmann::json& row, bool inputs_as_constants);

}  // namespace kiln::jit
