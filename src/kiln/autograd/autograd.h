// Reverse-mode autodiff. dispatch tells this layer about every op whose
// inputs require grad; a Node remembers the op, what its backward rule needs,
// and an edge to each input's producer. backward() walks the nodes in
// reverse topological order, calling each op's `grad` rule from the op table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

class Node;

// ---- grad mode (thread-local, on by default) ----
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// Disables recording in a scope: kiln::NoGradGuard guard;
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode(false); }
  ~NoGradGuard() { set_grad_mode(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode(true); }
  ~EnableGradGuard() { set_grad_mode(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- per-tensor state ----
// Marks a leaf as requiring grad (only floating tensors can); returns it.
const Tensor& requires_grad_(const Tensor& t, bool requires_grad = true);
bool is_leaf(const Tensor& t);  // not produced by a recorded op
// The gradient accumulated into a leaf by backward() (undefined when none).
Tensor grad(const Tensor& t);
void set_grad(const Tensor& t, const Tensor& grad);  // an undefined grad clears it
// The node that produced t (null for leaves), e.g. for printing grad_fn=<AddBackward>.
std::shared_ptr<Node> grad_fn(const Tensor& t);
std::string grad_fn_name(const Tensor& t);  // "AddBackward0", or "" for leaves
// A new tensor sharing t's storage (and version counter) with no history.
Tensor detach(const Tensor& t);

// ---- running backward ----
// Accumulates d(root)/d(leaf) into every leaf's grad. A non-scalar root needs
// an explicit grad_output of its shape. The graph is freed unless retain_graph.
void backward(const Tensor& root, const Tensor& grad_output = {}, bool retain_graph = false,
              bool create_graph = false);
// Returns d(outputs)/d(inputs) without touching .grad (torch.autograd.grad).
// allow_unused=false makes an input the outputs do not depend on an error.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Installs the dispatch hooks that record ops for backward (idempotent).
// requires_grad_() calls it; a program that makes tensors with
// TensorOptions::requires_grad before any autograd call calls it first.
void init_autograd();

}  // namespace kiln
