// Tensor hooks and retain_grad (see hooks.h for where each kind lives).
#include "kiln/autograd/hooks.h"

#include <algorithm>

#include "kiln/autograd/node.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace {

// Replaces `grad` by what the hook returns (when it returns something).
void run_hook(const std::shared_ptr<HookSlot>& slot, Tensor& grad) {
  if (!slot->fn || !grad.defined()) return;
  TensorHook fn = slot->fn;  // the hook may remove itself while it runs
  Tensor replaced = fn(grad);
  if (!replaced.defined()) return;
  KILN_CHECK(replaced.shape() == grad.shape(),
             "register_hook: a hook changed the shape of the gradient from ", grad.shape(), " to ",
             replaced.shape());
  grad = std::move(replaced);
}

bool removed(const std::shared_ptr<HookSlot>& slot) {
  return !slot->fn;
}

void store_retained(AutogradMetaImpl& meta, const Tensor& grad) {
  if (!meta.grad.defined()) {
    meta.grad = kiln::clone(grad_mode_enabled() ? grad : detach(grad));
    return;
  }
  meta.grad = meta.grad + grad;
}

// The callbacks of the backward running on this thread (innermost).
thread_local BackwardCallbacks* t_running_backward = nullptr;

}  // namespace

BackwardCallbacks::BackwardCallbacks() : outer_(t_running_backward) {
  t_running_backward = this;
}

BackwardCallbacks::~BackwardCallbacks() {
  t_running_backward = outer_;
}

void BackwardCallbacks::finish() {
  // By index: a callback may queue another.
  for (size_t i = 0; i < queued_.size(); ++i) {
    std::function<void()> callback = std::move(queued_[i]);
    callback();
  }
  queued_.clear();
}

void queue_callback(std::function<void()> callback) {
  KILN_CHECK(t_running_backward != nullptr,
             "queue_callback: can only be called while backward is running");
  t_running_backward->queued_.push_back(std::move(callback));
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  KILN_CHECK(leaf.defined() && leaf.requires_grad(),
             "register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
             "doesn't require gradient");
  KILN_CHECK(is_leaf(leaf),
             "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
             "registered on non-leaf tensors");
  TensorHook call = [hook = std::move(hook)](const Tensor& t) {
    hook(t);
    return Tensor();
  };
  auto slot = std::make_shared<HookSlot>(HookSlot{std::move(call)});
  ensure_autograd_meta(leaf).post_accumulate_hooks.push_back(slot);
  return HookHandle(slot);
}

void run_post_accumulate_grad_hooks(const Tensor& leaf) {
  AutogradMetaImpl* meta = autograd_meta(leaf);
  if (!meta || meta->post_accumulate_hooks.empty()) return;
  // By index, each slot copied: a hook may register or remove hooks.
  for (size_t i = 0; i < meta->post_accumulate_hooks.size(); ++i) {
    std::shared_ptr<HookSlot> slot = meta->post_accumulate_hooks[i];
    if (!slot->fn) continue;
    TensorHook fn = slot->fn;
    fn(leaf);
  }
  std::erase_if(meta->post_accumulate_hooks, removed);
}

void HookHandle::remove() {
  if (std::shared_ptr<HookSlot> slot = slot_.lock()) slot->fn = nullptr;
  slot_.reset();
}

HookHandle register_hook(const Tensor& t, TensorHook hook) {
  KILN_CHECK(t.defined() && t.requires_grad(),
             "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  auto slot = std::make_shared<HookSlot>(HookSlot{std::move(hook)});
  AutogradMetaImpl& meta = ensure_autograd_meta(t);
  if (meta.grad_fn) {
    meta.grad_fn->tensor_pre_hooks.push_back(TensorPreHook{meta.output_nr, slot});
  } else {
    meta.hooks.push_back(slot);
  }
  return HookHandle(slot);
}

void retain_grad(const Tensor& t) {
  KILN_CHECK(t.defined() && t.requires_grad(),
             "retain_grad: can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf(t)) return;
  AutogradMetaImpl& meta = ensure_autograd_meta(t);
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  meta.grad_fn->retained_grads.push_back(RetainedGrad{meta.output_nr, t.impl()->autograd});
}

bool retains_grad(const Tensor& t) {
  AutogradMetaImpl* meta = autograd_meta(t);
  return meta != nullptr && meta->grad_fn != nullptr && meta->retains_grad;
}

void run_tensor_hooks(Node& node, std::vector<Tensor>& grads) {
  if (auto* accumulator = dynamic_cast<AccumulateGrad*>(&node)) {
    AutogradMetaImpl* meta = autograd_meta(accumulator->leaf());
    if (!meta || meta->hooks.empty() || grads.empty()) return;
    // By index, on a copy of each slot: a hook may register another one
    // (growing the vector) while it runs.
    for (size_t i = 0; i < meta->hooks.size(); ++i)
      run_hook(std::shared_ptr<HookSlot>(meta->hooks[i]), grads[0]);
    std::erase_if(meta->hooks, removed);
    return;
  }
  for (size_t i = 0; i < node.tensor_pre_hooks.size(); ++i) {
    TensorPreHook hook = node.tensor_pre_hooks[i];
    if (size_t(hook.output_nr) < grads.size()) run_hook(hook.slot, grads[hook.output_nr]);
  }
  std::erase_if(node.tensor_pre_hooks,
                [](const TensorPreHook& hook) { return removed(hook.slot); });
  for (const RetainedGrad& retained : node.retained_grads) {
    std::shared_ptr<AutogradMeta> meta = retained.meta.lock();
    if (!meta || size_t(retained.output_nr) >= grads.size()) continue;
    if (!grads[retained.output_nr].defined()) continue;
    store_retained(static_cast<AutogradMetaImpl&>(*meta), grads[retained.output_nr]);
  }
}

}  // namespace kiln
