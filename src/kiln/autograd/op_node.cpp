// OpNode: the backward node of one recorded op. It saves the op's inputs and
// outputs with their versions and calls the op's grad rule from the table.
#include <atomic>
#include <mutex>

#include "kiln/autograd/node.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace {

std::atomic<uint64_t> g_next_sequence_nr{0};

// A tensor a backward rule will read, and the version it had when saved.
// Outputs are saved as history-free aliases: saving the output itself would
// make output -> its grad_fn -> output a reference cycle.
struct SavedTensor {
  Tensor value;
  uint64_t version = 0;
  bool is_output = false;
  int output_nr = 0;
};

SavedTensor save(const Tensor& t, bool is_output, int output_nr) {
  if (!t.defined()) return {};
  Tensor value = is_output ? detach(t) : t;
  return SavedTensor{value, t.version(), is_output, output_nr};
}

class OpNode final : public Node, public GradContext {
 public:
  OpNode(const OpDef& op, const Attrs& attrs, std::span<const Tensor> inputs,
         std::span<const Tensor> outputs)
      : op_(op), attrs_(attrs) {
    for (const Tensor& t : inputs) {
      input_metas_.push_back(meta_of(t));
      saved_inputs_.push_back(save(t, false, 0));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      output_metas_.push_back(meta_of(outputs[i]));
      saved_outputs_.push_back(save(outputs[i], true, int(i)));
    }
  }

  // An in-place op overwrote input `i` with its result: the saved value is
  // gone, so a rule that reads it must fail loudly, not read the new value.
  // (Saved detached: the tensor now points at this node, so holding it would
  // be a reference cycle.)
  void mark_overwritten(size_t i) {
    saved_inputs_[i].value = detach(saved_inputs_[i].value);
    saved_inputs_[i].version -= 1;
  }

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    KILN_CHECK(!released_,
               "trying to backward through the graph a second time (or directly "
               "access saved tensors after they have already been freed): ",
               name(),
               "'s saved tensors were freed by the previous backward; pass retain_graph=true "
               "if you need to backward twice");
    KILN_CHECK(op_.grad != nullptr, "the derivative for '", op_.name, "' is not implemented");
    grad_outputs_ = std::move(grad_outputs);
    for (size_t i = 0; i < grad_outputs_.size(); ++i) {
      if (grad_outputs_[i].defined()) continue;
      grad_outputs_[i] = zeros(to_static(output_metas_[i].shape), output_metas_[i].dtype);
    }
    std::vector<Tensor> grads = op_.grad(*this);
    KILN_ASSERT(grads.size() == input_metas_.size(), op_.name, "'s grad rule returned ",
                grads.size(), " gradients for ", input_metas_.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined() || !needs_input_grad(i)) continue;
      KILN_ASSERT(same_dims(to_dims(grads[i].shape()), input_metas_[i].shape), op_.name,
                  "'s grad rule returned shape ", grads[i].shape(), " for input ", i, " of shape ",
                  input_metas_[i].shape);
    }
    grad_outputs_.clear();
    return grads;
  }

  std::string name() const override {
    std::string n = op_.name;
    bool upper = true;
    std::string camel;
    for (char c : n) {
      if (c == '_') {
        upper = true;
        continue;
      }
      camel += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
      upper = false;
    }
    return camel + "Backward0";
  }
  size_t num_outputs() const override { return output_metas_.size(); }
  void release() override {
    saved_inputs_.clear();
    saved_outputs_.clear();
    released_ = true;
  }

  // GradContext
  size_t num_inputs() const override { return input_metas_.size(); }
  Tensor input(size_t i) const override { return unpack(saved_inputs_.at(i), "input", i); }
  Tensor output(size_t i) const override { return unpack(saved_outputs_.at(i), "output", i); }
  const TensorMeta& input_meta(size_t i) const override { return input_metas_.at(i); }
  bool needs_input_grad(size_t i) const override { return next_edges.at(i).node != nullptr; }
  const Tensor& grad_output(size_t i) const override { return grad_outputs_.at(i); }
  const Attrs& attrs() const override { return attrs_; }

 private:
  Tensor unpack(const SavedTensor& saved, const char* what, size_t i) const {
    if (!saved.value.defined()) return Tensor();
    KILN_CHECK(saved.value.version() == saved.version,
               "one of the variables needed for gradient computation has been modified by an "
               "inplace operation: ",
               what, " ", i, " of ", op_.name, " is at version ", saved.value.version(),
               "; expected version ", saved.version, " instead");
    if (!saved.is_output || !grad_mode_enabled()) return saved.value;
    // Differentiating the backward itself (create_graph): the output must
    // lead back to this node again.
    Tensor linked = detach(saved.value);
    linked.impl()->requires_grad = true;
    AutogradMetaImpl& meta = ensure_autograd_meta(linked);
    meta.grad_fn = std::const_pointer_cast<Node>(shared_from_this());
    meta.output_nr = saved.output_nr;
    return linked;
  }

  const OpDef& op_;
  Attrs attrs_;
  std::vector<TensorMeta> input_metas_, output_metas_;
  std::vector<SavedTensor> saved_inputs_, saved_outputs_;
  std::vector<Tensor> grad_outputs_;
  bool released_ = false;
};

}  // namespace

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1)) {}

// Note [Keeping the first gradient]
// A leaf's first gradient was copied into .grad, because the incoming
// tensor may alias something the program keeps (a gradient it passed to
// backward, one a hook kept, another leaf's gradient: add's backward hands
// the same tensor to both inputs). PyTorch keeps the tensor itself when no
// other handle can see it, and so does kiln now: this call holds the only
// handle (the engine moves its buffer in; a root gradient, a capture or a
// second edge keeps another), no other tensor views its storage, kiln owns
// that memory and has not lent it (a NumPy array from a custom Function's
// backward, one a hook exported), and it is contiguous from the storage's
// start, as a copy would be. That saves a copy of every parameter per
// backward. With create_graph the incoming gradient, history and all, is
// stored as before.
namespace {

bool only_handle(const Tensor& grad) {
  const Storage& storage = grad.storage();
  return grad.use_count() == 1 && storage.use_count() == 1 && storage->owned_by_kiln() &&
         !storage->lent() && grad.is_contiguous() && grad.offset() == 0;
}

}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grad_outputs) {
  const Tensor& incoming = grad_outputs.at(0);
  if (!incoming.defined()) return {};
  AutogradMetaImpl& meta = ensure_autograd_meta(leaf_);
  if (!meta.grad.defined()) {
    if (grad_mode_enabled()) {
      meta.grad = incoming;
    } else {
      meta.grad = only_handle(incoming) ? detach(incoming) : kiln::clone(detach(incoming));
    }
  } else {
    meta.grad = meta.grad + incoming;
  }
  run_post_accumulate_grad_hooks(leaf_);
  return {};
}

// Note [Leaves shared across threads]: a parameter is an input of forward
// passes running on many threads at once (a compiled model called from
// several threads replays through dispatch when autograd must see it). Its
// autograd meta and its accumulator are made on first use; one lock keeps
// two threads from making (and half-reading) them at the same time.
std::mutex& leaf_mutex() {
  static std::mutex mutex;
  return mutex;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  std::lock_guard<std::mutex> lock(leaf_mutex());
  AutogradMetaImpl& meta = ensure_autograd_meta(t);
  if (meta.grad_fn) return Edge{meta.grad_fn, meta.output_nr};
  std::shared_ptr<Node> acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

void check_inplace(const OpDef& op, const Tensor& out) {
  KILN_CHECK(!grad_mode_enabled() || !is_leaf(out), op.name,
             ": a leaf tensor that requires "
             "grad is being used in an in-place operation");
}

void record_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
               std::span<const Tensor> outputs) {
  if (!grad_mode_enabled()) return;
  auto node = std::make_shared<OpNode>(op, attrs, inputs, outputs);
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs)
    node->next_edges.push_back(gradient_edge(in));
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Tensor& out : outputs) {
      if (inputs[i].defined() && inputs[i].is_same(out)) node->mark_overwritten(i);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!is_floating(out.dtype())) continue;  // indices, masks, comparisons carry no gradient
    set_history(out, node, int(i));
  }
}

void set_history(const Tensor& t, std::shared_ptr<Node> node, int output_nr) {
  t.impl()->requires_grad = true;
  AutogradMetaImpl& meta = ensure_autograd_meta(t);
  meta.grad_fn = std::move(node);
  meta.output_nr = output_nr;
}

}  // namespace kiln
