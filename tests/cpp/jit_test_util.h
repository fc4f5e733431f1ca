// Helpers for the compiled-vs-eager and tracing tests.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/jit/ir/graph.h"
#include "kiln/jit/trace/report.h"
#include "kiln/ops/copy.h"
#include "test_util.h"

namespace kiln {

// Same dtype, same shape, and the same bytes element by element (NaN
// payloads and signed zeros included), whatever the two layouts.
inline testing::AssertionResult bitwise_equal(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return testing::AssertionFailure()
           << "dtype " << to_string(got.dtype()) << " vs " << to_string(want.dtype());
  }
  if (got.shape() != want.shape()) {
    return testing::AssertionFailure()
           << "shape " << to_string(got.shape()) << " vs " << to_string(want.shape());
  }
  const Tensor a = clone(got), b = clone(want);
  const size_t itemsize = a.itemsize();
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + size_t(i) * itemsize, pb + size_t(i) * itemsize, itemsize) != 0) {
      return testing::AssertionFailure()
             << "element " << i << " differs: " << read_element(a, i).to_double() << " vs "
             << read_element(b, i).to_double();
    }
  }
  return testing::AssertionSuccess();
}

}  // namespace kiln

namespace kiln::jit {

// Collects the warnings reported while it lives (instead of printing them).
class CapturedWarnings {
 public:
  CapturedWarnings() {
    previous_ = set_warning_handler([this](const TraceWarning& w) { warnings.push_back(w); });
  }
  ~CapturedWarnings() { set_warning_handler(previous_); }
  CapturedWarnings(const CapturedWarnings&) = delete;
  CapturedWarnings& operator=(const CapturedWarnings&) = delete;

  size_t count(WarningKind kind) const {
    size_t n = 0;
    for (const TraceWarning& w : warnings)
      n += w.kind == kind;
    return n;
  }
  // The first warning of `kind` whose message contains `text`, or null.
  const TraceWarning* find(WarningKind kind, const std::string& text = "") const {
    for (const TraceWarning& w : warnings) {
      if (w.kind == kind && w.message.find(text) != std::string::npos) return &w;
    }
    return nullptr;
  }
  std::string all() const {
    std::string text;
    for (const TraceWarning& w : warnings)
      text += "[" + to_string(w.kind) + "] " + w.message + "\n";
    return text;
  }

  std::vector<TraceWarning> warnings;

 private:
  WarningHandler previous_;
};

// Same dtype, shape and bytes.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = contiguous(a), cb = contiguous(b);
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * ca.itemsize()) == 0;
}

inline TensorMeta meta(DType dtype, const IntList& shape) {
  return TensorMeta{dtype, to_dims(shape)};
}

inline TensorMeta f32(IntList shape) {
  return meta(DType::Float32, std::move(shape));
}

// W1's first layers: linear, relu, a wrapped number, a reduction with two
// outputs, a linear without bias; parameters by state_dict name.
std::unique_ptr<Graph> small_mlp();

// One 3x3 convolution (stride 1, padding 1, no bias) of weight `w`, a
// parameter, over a float32 input of `input_shape`.
std::shared_ptr<Graph> conv3x3_graph(const Tensor& w, IntList input_shape);

// One row of the op test table as a graph: the row's op over graph inputs
// (or, with `inputs_as_constants`, over constants holding the row's data),
// with a cast node in front of every input whose dtype the kernel does not
// take, as the tracer records them. Wrapped numbers are always constants.
std::unique_ptr<Graph> graph_of_row(const nlohmann::json& row, bool inputs_as_constants);

// How many times `op_name` runs per call: its nodes, and its instructions
// inside fused_elementwise programs (the fusion pass merges chains).
size_t count_op_runs(const Graph& g, const std::string& op_name);

}  // namespace kiln::jit
