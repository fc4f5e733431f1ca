// dispatch: the only door every op goes through.
//   1. check the inputs and infer output metadata (errors name op and shapes)
//   2. if a trace is recording, tell the observer
//   3. run the kernel (or make the view)
//   4. if an input requires grad, let autograd record the backward node
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "kiln/core/trace_hook.h"
#include "kiln/ops/op.h"
#include "kiln/ops/registry.h"

namespace kiln {

std::vector<Tensor> dispatch(const OpDef& op, std::vector<Tensor> inputs, const Attrs& attrs = {});
Tensor dispatch1(const OpDef& op, std::vector<Tensor> inputs, const Attrs& attrs = {});

// Runs a one-output op writing into `out` (in-place ops, copy_). The result
// must broadcast to out's shape and be castable to out's dtype; out's version
// counter is bumped.
// Refuses an in-place write whose destination repeats memory (an expanded
// tensor) or shares memory with an input laid out differently (PyTorch's
// rule); dispatch_into() calls it, and so do in-place ops that dispatch
// under another op's name (copy_ runs cast).
void check_write_overlap(std::string_view op_name, const std::vector<Tensor>& inputs,
                         const Tensor& out);
void dispatch_into(const OpDef& op, std::vector<Tensor> inputs, const Attrs& attrs,
                   const Tensor& out);

// Fills defaults and checks every attribute against the op's declaration.
Attrs normalize_attrs(const OpDef& op, const Attrs& given);

// Shape inference alone (no kernel); what tracing and graph passes use.
InferResult infer_meta(const OpDef& op, std::span<const TensorMeta> inputs, const Attrs& attrs);
TensorMeta meta_of(const Tensor& t);
cpu::StridedView view_of(const Tensor& t);

// Hooks for the layers above ops.
struct DispatchObserver {
  virtual ~DispatchObserver() = default;
  virtual void on_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                     std::span<const Tensor> outputs) = 0;
  // dispatch_into calls this before it writes into `out` (on_op follows the
  // write), so a recorder can still see the values the write overwrites.
  virtual void before_write(const OpDef& op, std::span<const Tensor> inputs, const Tensor& out) {}
};
// The observer of this thread (a trace being recorded), or null.
DispatchObserver* dispatch_observer();
void set_dispatch_observer(DispatchObserver* observer);

// Runs a scope as if no trace were recording on this thread: what it makes
// comes from outside the traced code (an optimizer creating its state while
// a training step is compiled, so that the state persists across calls).
class PauseRecording {
 public:
  PauseRecording();
  ~PauseRecording();
  PauseRecording(const PauseRecording&) = delete;
  PauseRecording& operator=(const PauseRecording&) = delete;

 private:
  DispatchObserver* observer_;
  TraceHook* hook_;
};

using AutogradHook = void (*)(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                              std::span<const Tensor> outputs);
void set_autograd_hook(AutogradHook hook);
// Runs before an in-place write into `out` (PyTorch refuses to overwrite a
// leaf that requires grad while recording, before touching its data).
using InplaceCheck = void (*)(const OpDef& op, const Tensor& out);
void set_inplace_check(InplaceCheck check);

}  // namespace kiln
