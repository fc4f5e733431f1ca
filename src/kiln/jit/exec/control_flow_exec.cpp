#include "kiln/jit/exec/control_flow_exec.h"

#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/exec/lstm_scan.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/control_flow.h"

namespace kiln::jit {
namespace {

using Views = std::vector<cpu::StridedView>;
using Keys = std::vector<uint64_t>;

// A block's executable, over the block itself (owned by its node's graph).
std::unique_ptr<Executable> executable_of(const Graph& block) {
  return std::make_unique<Executable>(std::shared_ptr<const Graph>(&block, [](const Graph*) {}));
}

// The keys of a loop block's inputs for one run: none for the first
// `varying` (carried values and slices, new each iteration); for each
// capture the enclosing plan's key, else one made for this run.
Keys loop_keys(size_t varying, size_t num_inputs, std::span<const uint64_t> outer,
               size_t first_outer) {
  Keys keys(num_inputs, 0);
  for (size_t i = varying; i < num_inputs; ++i) {
    const size_t o = first_outer + i;
    keys[i] = o < outer.size() && outer[o] ? outer[o] : fresh_input_key();
  }
  return keys;
}

// Node input `offset + i` for each input i of a block's plan that the plan
// writes in place.
void add_mutated(const Executable& block, size_t offset, std::vector<size_t>& out) {
  for (const Mutation& m : block.plan().mutations) {
    if (m.root != RootKind::Input) continue;
    const size_t input = offset + m.index;
    if (std::find(out.begin(), out.end(), input) == out.end()) out.push_back(input);
  }
}

bool truth(const cpu::StridedView& pred) {
  return *static_cast<const bool*>(pred.data);
}

// Slice t of a view along its leading dim.
cpu::StridedView slice(const cpu::StridedView& whole, int64_t t) {
  cpu::StridedView part = whole;
  part.ndim = whole.ndim - 1;
  for (int d = 0; d < part.ndim; ++d) {
    part.shape[d] = whole.shape[d + 1];
    part.strides[d] = whole.strides[d + 1];
  }
  part.data =
      static_cast<char*>(whole.data) + t * whole.strides[0] * int64_t(element_size(whole.dtype));
  return part;
}

class CondKernel final : public ControlFlowKernel {
 public:
  explicit CondKernel(const Node& node)
      : then_(executable_of(node.block(0))), else_(executable_of(node.block(1))) {}

  // A branch runs once per run: only the enclosing plan's keys are worth passing.
  void run_keyed(const KernelArgs& args, std::span<const uint64_t> keys) const override {
    const Executable& branch = truth(args.inputs[0]) ? *then_ : *else_;
    branch.run_views(args.inputs.subspan(1), args.outputs, keys.empty() ? keys : keys.subspan(1));
  }

  std::vector<size_t> mutated_inputs() const override {
    std::vector<size_t> out;
    add_mutated(*then_, 1, out);
    add_mutated(*else_, 1, out);
    return out;
  }

  std::vector<const Executable*> blocks() const override { return {then_.get(), else_.get()}; }

 private:
  std::unique_ptr<Executable> then_, else_;
};

class WhileKernel final : public ControlFlowKernel {
 public:
  explicit WhileKernel(const Node& node)
      : cond_(executable_of(node.block(0))),
        body_(executable_of(node.block(1))),
        num_carried_(size_t(node.attrs().get_int("num_carried"))),
        max_iterations_(node.attrs().get_int("max_iterations")) {
    // Carried values the body returns unchanged (exporters carry weights so:
    // Paddle's SLANet carries five through its decoder loop) keep one buffer
    // for both sets, so no iteration copies them: the body's copy of its
    // input into its output is then a copy onto itself, which copy_convert
    // skips.
    const Graph& body = node.block(1);
    for (size_t j = 0; j < num_carried_; ++j)
      if (body.outputs()[j] == body.inputs()[j]) passed_through_.push_back(j);
    // The predicate lives on the call's stack: one bool, viewed with the
    // cond block's one-element output shape.
    const IntList shape = to_static(node.block(0).outputs()[0]->shape(), "while_loop");
    pred_.dtype = DType::Bool;
    pred_.ndim = int(shape.size());
    for (int d = 0; d < pred_.ndim; ++d) {
      pred_.shape[d] = shape[size_t(d)];
      pred_.strides[d] = 1;
    }
  }

  // outputs: the carried results, then a second set of them.
  void run_keyed(const KernelArgs& args, std::span<const uint64_t> outer_keys) const override {
    const size_t n = num_carried_;
    const Keys keys = loop_keys(n, args.inputs.size(), outer_keys, 0);
    std::span<const cpu::StridedView> results = args.outputs.first(n);
    Views a(results.begin(), results.end()),
        b(args.outputs.begin() + std::ptrdiff_t(n), args.outputs.begin() + std::ptrdiff_t(2 * n));
    bool flag = false;
    cpu::StridedView pred = pred_;
    pred.data = &flag;
    for (size_t i = 0; i < n; ++i)
      cpu::copy_convert(a[i], args.inputs[i]);
    for (size_t j : passed_through_)
      b[j] = a[j];
    for (Views* state : {&a, &b})
      state->insert(state->end(), args.inputs.begin() + std::ptrdiff_t(n), args.inputs.end());
    Views *current = &a, *next = &b;
    for (int64_t iteration = 0;; ++iteration) {
      cond_->run_views(*current, {&pred, 1}, keys);
      if (!truth(pred)) break;
      KILN_CHECK(max_iterations_ < 0 || iteration < max_iterations_,
                 "while_loop: the loop exceeded max_iterations=", max_iterations_);
      body_->run_views(*current, std::span(next->data(), n), keys);
      std::swap(current, next);
    }
    if (current == &a) return;
    for (size_t i = 0; i < n; ++i)
      cpu::copy_convert(results[i], (*current)[i]);
  }

  // Carried values live in the kernel's own buffers: only captures count.
  std::vector<size_t> mutated_inputs() const override {
    std::vector<size_t> out;
    add_mutated(*cond_, 0, out);
    add_mutated(*body_, 0, out);
    std::erase_if(out, [&](size_t i) { return i < num_carried_; });
    return out;
  }

  std::vector<const Executable*> blocks() const override { return {cond_.get(), body_.get()}; }

 private:
  std::unique_ptr<Executable> cond_, body_;
  size_t num_carried_;
  std::vector<size_t> passed_through_;  // carried values the body returns as they came
  int64_t max_iterations_;
  cpu::StridedView pred_;
};

class ScanKernel final : public ControlFlowKernel {
 public:
  explicit ScanKernel(const Node& node)
      : step_(executable_of(node.block(0))),
        layout_(scan_layout(node)),
        reverse_(node.attrs().get_bool("reverse")),
        lstm_(LstmScan::match(node)) {}

  // inputs: init, xs, captures; outputs: carry, ys, a second set of carry.
  void run_keyed(const KernelArgs& args, std::span<const uint64_t> outer_keys) const override {
    const size_t n = layout_.num_carry, k = layout_.num_xs, p = layout_.num_ys;
    const Keys keys = loop_keys(n + k, args.inputs.size(), outer_keys, 0);
    if (lstm_ && lstm_->run(args, keys)) return;
    std::span<const cpu::StridedView> carry = args.outputs.first(n);
    std::span<const cpu::StridedView> ys = args.outputs.subspan(n, p);
    Views a(carry.begin(), carry.end()),
        b(args.outputs.begin() + std::ptrdiff_t(n + p), args.outputs.end());
    for (size_t i = 0; i < n; ++i)
      cpu::copy_convert(a[i], args.inputs[i]);
    const int64_t steps = k ? args.inputs[n].shape[0] : (p ? ys[0].shape[0] : length_of(args));
    Views in(n + k + layout_.num_captures), out(n + p);
    std::copy(args.inputs.begin() + std::ptrdiff_t(n + k), args.inputs.end(),
              in.begin() + std::ptrdiff_t(n + k));
    Views *current = &a, *next = &b;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse_ ? steps - 1 - s : s;
      std::copy(current->begin(), current->end(), in.begin());
      for (size_t j = 0; j < k; ++j)
        in[n + j] = slice(args.inputs[n + j], t);
      std::copy(next->begin(), next->end(), out.begin());
      for (size_t j = 0; j < p; ++j)
        out[n + j] = slice(ys[j], t);
      step_->run_views(in, out, keys);
      std::swap(current, next);
    }
    if (current == &a) return;
    for (size_t i = 0; i < n; ++i)
      cpu::copy_convert(carry[i], (*current)[i]);
  }

  // Carried values live in the kernel's own buffers; a slice of xs is xs.
  std::vector<size_t> mutated_inputs() const override {
    std::vector<size_t> out;
    add_mutated(*step_, 0, out);
    std::erase_if(out, [&](size_t i) { return i < layout_.num_carry; });
    return out;
  }

  std::vector<const Executable*> blocks() const override { return {step_.get()}; }

 private:
  int64_t length_of(const KernelArgs& args) const { return args.attrs.get_int("length"); }

  std::unique_ptr<Executable> step_;
  ScanLayout layout_;
  bool reverse_;
  std::unique_ptr<LstmScan> lstm_;  // an LSTM layer's step: fused at batch 1
};

}  // namespace

std::vector<const Value*> control_flow_scratch(const Node& node) {
  const std::string& name = node.op().name;
  size_t carried = 0;
  if (name == "while_loop") carried = size_t(node.attrs().get_int("num_carried"));
  if (name == "scan") carried = scan_layout(node).num_carry;
  std::vector<const Value*> scratch;
  for (size_t i = 0; i < carried; ++i)
    scratch.push_back(node.output(i));
  return scratch;
}

std::unique_ptr<ControlFlowKernel> prepare_control_flow(const Node& node) {
  const std::string& name = node.op().name;
  if (name == "cond") return std::make_unique<CondKernel>(node);
  if (name == "while_loop") return std::make_unique<WhileKernel>(node);
  KILN_CHECK(name == "scan", "op '", name, "' has blocks but no executor");
  return std::make_unique<ScanKernel>(node);
}

}  // namespace kiln::jit
