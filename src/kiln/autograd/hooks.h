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
// Makes backward store the gradient of non-leaf `t` into its .grad
// (accumulating, like a leaf's); a no-op on a leaf.
void retain_grad(const Tensor& t);
bool retains_grad(const Tensor& t);  // true only for a non-leaf after retain_grad()

// The engine's half: runs the hooks that apply to the gradients `node` is
// about to consume (one per output, undefined where none arrived).
void run_tensor_hooks(Node& node, std::vector<Tensor>& grads);

}  // namespace kiln
