// The backward graph: a Node per recorded op, edges to the nodes that
// produced its inputs, and the saved tensors its rule reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/hooks.h"
#include "kiln/ops/op.h"

namespace kiln {

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  int input_nr = 0;            // which of node's gradient slots receives it
};

// What the autograd layer hangs on a TensorImpl.
struct AutogradMetaImpl : AutogradMeta {
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // set for non-leaves
  int output_nr = 0;
  // A leaf's accumulator, shared by every node that uses the leaf. Weak: the
  // accumulator holds the leaf, so a strong pointer here would be a cycle.
  std::weak_ptr<Node> grad_accumulator;
  // A leaf's hooks (hooks.h; a non-leaf's are on its grad_fn).
  std::vector<std::shared_ptr<HookSlot>> hooks;
  // Run after AccumulateGrad wrote this backward's gradient (hooks.h); each
  // slot's fn is called with the leaf and its result ignored.
  std::vector<std::shared_ptr<HookSlot>> post_accumulate_hooks;
  bool retains_grad = false;  // a non-leaf after retain_grad()
};

AutogradMetaImpl* autograd_meta(const Tensor& t);  // null when none
AutogradMetaImpl& ensure_autograd_meta(const Tensor& t);

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  // Gradients w.r.t. this node's inputs (one per edge) from those w.r.t. its
  // outputs (one per output; undefined where none arrived).
  virtual std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) = 0;
  virtual std::string name() const = 0;
  virtual size_t num_outputs() const = 0;
  // Drops saved tensors after a backward that did not retain the graph.
  virtual void release() {}

  std::vector<Edge> next_edges;
  // Hooks on the gradients of this node's outputs (hooks.h), run by the
  // engine before apply: the registered ones in order, then retain_grad's.
  std::vector<TensorPreHook> tensor_pre_hooks;
  std::vector<RetainedGrad> retained_grads;
  uint64_t sequence_nr;  // creation order: later nodes run first when several are ready
};

// Accumulates the incoming gradient into a leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  size_t num_outputs() const override { return 1; }
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// The edge through which a gradient for `t` flows: its grad_fn, or its
// leaf accumulator (created on demand), or none.
Edge gradient_edge(const Tensor& t);

// Makes `node`'s output `output_nr` the history of `t` (which then requires
// grad): what a backward node computed elsewhere (a compiled graph's
// backward) hangs on the tensors it differentiates.
void set_history(const Tensor& t, std::shared_ptr<Node> node, int output_nr);

// Installed in dispatch: records a node when grad mode is on and an input
// requires grad.
void check_inplace(const OpDef& op, const Tensor& out);
void record_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
               std::span<const Tensor> outputs);

}  // namespace kiln
