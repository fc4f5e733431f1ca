// Tensor hooks: functions that see (and may replace) the gradient of one
// tensor while backward runs, as torch's Tensor.register_hook.
//
//   HookHandle h = register_hook(y, [](const Tensor& g) { return g * 2.0; });
//   retain_grad(y);   // y is not a leaf: backward also stores its grad
//   backward(loss);   // y's hook doubles the gradient flowing through y
//   h.remove();
//
// Where they live (Note [Where tensor hooks live]): a leaf's hooks are on its
// autograd meta, and run before its gradient is accumulated into .grad. A
// non-leaf's are on its grad_fn, keyed by the output the tensor is, and run
// on the summed gradient before that node consumes it; the tensor itself may
// be gone by then (y = x * 2; y.register_hook(h); z = y * 3; del y). Both
// run before grad(inputs=...) captures a gradient, so the captured value is
// the hooked one. retain_grad() is such a hook, always run after the others.
//
// Two more, for code that acts on finished gradients (data-parallel training
// all-reduces each parameter's gradient as soon as backward has produced it):
//
//   register_post_accumulate_grad_hook(w, [](const Tensor& w) { send(grad(w)); });
//   queue_callback([] { wait_for_sends(); });   // only from inside a backward
//
// A post-accumulate hook runs on a leaf after its .grad took this backward's
// gradient (once per backward: the engine sums what arrives for a leaf
// before accumulating); grad(inputs=...) writes no .grad, so runs none. A
// queued callback runs when the backward that queued it has walked its whole
// graph, before backward() returns, on the thread that ran it.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

class Node;

// Returns the gradient to use instead of `grad`, or an undefined tensor to
// keep it. The replacement must have grad's shape.
using TensorHook = std::function<Tensor(const Tensor& grad)>;

// One registered hook; `fn` is emptied when its handle removes it.
struct HookSlot {
  TensorHook fn;
};

// A non-leaf's hook, on its grad_fn.
struct TensorPreHook {
  int output_nr = 0;
  std::shared_ptr<HookSlot> slot;
};

// A non-leaf whose gradient retain_grad() stores into its .grad. Weak: the
// tensor holds its grad_fn, which holds this.
struct RetainedGrad {
  int output_nr = 0;
  std::weak_ptr<AutogradMeta> meta;
};

// What register_hook returns: remove() unregisters the hook (a no-op the
// second time, or once the tensor is gone). It does not keep the tensor alive.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::weak_ptr<HookSlot> slot) : slot_(std::move(slot)) {}
  void remove();

 private:
  std::weak_ptr<HookSlot> slot_;
};

// Registers `hook` on t's gradient; t must require grad.
HookHandle register_hook(const Tensor& t, TensorHook hook);
// Calls `hook(leaf)` after each backward accumulated a gradient into the
// .grad of `leaf`, which must be a leaf that requires grad. The hook
// returns nothing; it may read and modify the .grad in place.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;
HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
// Runs `callback` once the innermost running backward on this thread has
// finished its walk (after every node, before it returns). Outside a
// backward it is an error. A callback may queue more; they run in order.
void queue_callback(std::function<void()> callback);
// Makes backward store the gradient of non-leaf `t` into its .grad
// (accumulating, like a leaf's); a no-op on a leaf.
void retain_grad(const Tensor& t);
bool retains_grad(const Tensor& t);  // true only for a non-leaf after retain_grad()

// The engine's half: runs the hooks that apply to the gradients `node` is
// about to consume (one per output, undefined where none arrived).
void run_tensor_hooks(Node& node, std::vector<Tensor>& grads);
// Runs `leaf`'s post-accumulate hooks (AccumulateGrad calls it).
void run_post_accumulate_grad_hooks(const Tensor& leaf);

// What run_backward holds while it walks: the callbacks queued meanwhile,
// run by finish() (skipped when the walk throws).
class BackwardCallbacks {
 public:
  BackwardCallbacks();
  ~BackwardCallbacks();
  BackwardCallbacks(const BackwardCallbacks&) = delete;
  BackwardCallbacks& operator=(const BackwardCallbacks&) = delete;
  void finish();

 private:
  friend void queue_callback(std::function<void()> callback);
  std::vector<std::function<void()>> queued_;
  BackwardCallbacks* outer_;
};

}  // namespace kiln
