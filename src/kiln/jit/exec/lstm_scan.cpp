#include "kiln/jit/exec/lstm_scan.h"

#include <atomic>

#include "kiln/jit/ir/control_flow.h"

namespace kiln::jit {
namespace {

// The producer of `v` when it is a node of the step block named `op`.
const Node* made_by(const Value* v, const char* op) {
  const Node* node = v->producer();
  return node && node->op().name == op ? node : nullptr;
}

// Index of `v` among the block's inputs, or -1.
int64_t input_index(const Graph& block, const Value* v) {
  const std::vector<Value*>& inputs = block.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == v) return int64_t(i);
  }
  return -1;
}

bool is_f32(const cpu::StridedView& v) {
  return v.dtype == DType::Float32;
}

// A float32 view of `count` contiguous floats (any shape of that many).
bool is_row(const cpu::StridedView& v, int64_t count) {
  if (!is_f32(v) || v.numel() != count) return false;
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != stride) return false;
    stride *= v.shape[d];
  }
  return true;
}

// [T, 1, width] (one row per step; the step stride is free), float32.
bool is_steps_of_rows(const cpu::StridedView& v, int64_t width) {
  return is_f32(v) && v.ndim == 3 && v.shape[1] == 1 && v.shape[2] == width &&
         (v.strides[2] == 1 || width == 1);
}

}  // namespace

std::unique_ptr<LstmScan> LstmScan::match(const Node& scan) {
  const ScanLayout layout = scan_layout(scan);
  if (layout.num_carry != 2 || layout.num_xs != 1 || layout.num_ys != 1) return nullptr;
  const Graph& block = scan.block(0);
  if (block.num_nodes() != 2 || block.outputs().size() != 3) return nullptr;
  const Value *h = block.outputs()[0], *c = block.outputs()[1];
  const Node* cell = made_by(h, "lstm_cell_pointwise");
  if (!cell || block.outputs()[2] != h || c != cell->output(1) || h != cell->output(0)) {
    return nullptr;
  }
  const Node* linear = made_by(cell->input(1), "linear");
  if (!linear || cell->input(0) != block.inputs()[2] || cell->input(2) != block.inputs()[1] ||
      linear->input(0) != block.inputs()[0]) {
    return nullptr;
  }
  // The weight and bias are captures (block inputs past h, c and gi).
  const int64_t weight = input_index(block, linear->input(1));
  const int64_t bias = linear->inputs().size() > 2 ? input_index(block, linear->input(2)) : 0;
  if (weight < 3 || (linear->inputs().size() > 2 && bias < 3)) return nullptr;
  return std::unique_ptr<LstmScan>(
      new LstmScan(size_t(weight), size_t(bias), scan.attrs().get_bool("reverse")));
}

bool LstmScan::run(const KernelArgs& args, std::span<const uint64_t> keys) const {
  const cpu::StridedView &w = args.inputs[weight_], &gi = args.inputs[2];
  if (!is_f32(w) || w.ndim != 2 || w.strides[1] != 1 || w.shape[0] % 4 != 0) return false;
  const int64_t H = w.shape[0] / 4;
  if (H == 0 || w.shape[1] != H) return false;
  const int64_t steps = gi.ndim == 3 ? gi.shape[0] : 0;
  const cpu::StridedView &h_n = args.outputs[0], &c_n = args.outputs[1], &ys = args.outputs[2];
  const bool fits = is_row(args.inputs[0], H) && is_row(args.inputs[1], H) && is_row(h_n, H) &&
                    is_row(c_n, H) && is_steps_of_rows(gi, 4 * H) && is_steps_of_rows(ys, H) &&
                    ys.shape[0] == steps && (!bias_ || is_row(args.inputs[bias_], 4 * H));
  if (!fits) return false;
  std::shared_ptr<const Packed> packed = packed_for(w, keys.empty() ? 0 : keys[weight_]);
  cpu::lstm_recurrent_scan_f32(
      packed->weights,
      cpu::LstmScanArgs{.gi = gi.ptr<const float>(),
                        .gi_step = gi.strides[0],
                        .ys = ys.ptr<float>(),
                        .ys_step = ys.strides[0],
                        .h0 = args.inputs[0].ptr<const float>(),
                        .c0 = args.inputs[1].ptr<const float>(),
                        .b_hh = bias_ ? args.inputs[bias_].ptr<const float>() : nullptr,
                        .h_n = h_n.ptr<float>(),
                        .c_n = c_n.ptr<float>(),
                        .steps = steps,
                        .reverse = reverse_});
  return true;
}

// W_hh packed under `key` (0: no key, packed for this run only). A copy
// another run still reads is left to it and a new one made, as
// PreparedProduct does with its packed weights.
std::shared_ptr<const LstmScan::Packed> LstmScan::packed_for(const cpu::StridedView& w,
                                                             uint64_t key) const {
  std::lock_guard<std::mutex> lock(packed_mutex_);
  if (key && packed_ && packed_->key == key && packed_->source == w.data) return packed_;
  if (!packed_ || packed_.use_count() > 1) packed_ = std::make_shared<Packed>();
  // use_count() is a relaxed read: order the last reader's reads of the
  // buffer before this repack.
  std::atomic_thread_fence(std::memory_order_acquire);
  packed_->weights.pack(w.ptr<const float>(), w.strides[0], w.shape[0] / 4, w.shape[1]);
  packed_->key = key;
  packed_->source = w.data;
  return packed_;
}

}  // namespace kiln::jit
