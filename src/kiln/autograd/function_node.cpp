// FunctionNode: the backward node of a custom function (function_node.h).
// Its apply hands the output gradients to the user's backward and checks
// what comes back against the inputs, as torch's validate_outputs does.
#include "kiln/autograd/function_node.h"

#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/grad_util.h"

namespace kiln {
namespace {

// Whether a tensor of shape `from` broadcasts to `to` (its gradient may be
// summed back from `to`).
bool broadcasts_to(const IntList& from, const IntList& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t f = from[from.size() - 1 - i], t = to[to.size() - 1 - i];
    if (f != t && f != 1) return false;
  }
  return true;
}

bool contains(const std::vector<Tensor>& list, const Tensor& t) {
  return std::any_of(list.begin(), list.end(), [&](const Tensor& x) { return x.is_same(t); });
}

}  // namespace

class FunctionNode final : public Node {
 public:
  FunctionNode(const std::string& name, std::shared_ptr<FunctionContext> ctx,
               FunctionBackward backward, const std::vector<Tensor>& inputs,
               const std::vector<Tensor>& outputs)
      : name_(name + "Backward"), ctx_(std::move(ctx)), backward_(std::move(backward)) {
    for (const Tensor& in : inputs) {
      input_defined_.push_back(in.defined());
      input_shapes_.push_back(in.defined() ? in.shape() : IntList{});
      input_dtypes_.push_back(in.defined() ? in.dtype() : DType::Float32);
    }
    for (const Tensor& out : outputs) {
      output_shapes_.push_back(out.defined() ? out.shape() : IntList{});
      output_dtypes_.push_back(out.defined() ? out.dtype() : DType::Float32);
    }
  }

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    KILN_CHECK(!ctx_->released_,
               "trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed): ",
               name_,
               "'s saved tensors were freed by the previous backward; pass retain_graph=true if "
               "you need to backward twice");
    grad_outputs.resize(output_shapes_.size());
    for (size_t i = 0; i < grad_outputs.size() && ctx_->materialize_grads_; ++i) {
      if (!grad_outputs[i].defined()) grad_outputs[i] = zeros(output_shapes_[i], output_dtypes_[i]);
    }
    return checked(backward_(*ctx_, grad_outputs));
  }

  std::string name() const override { return name_; }
  size_t num_outputs() const override { return output_shapes_.size(); }
  void release() override {
    ctx_->release();
    backward_ = nullptr;  // what it holds (a Python function and its ctx) goes now
  }

 private:
  // One gradient per input, of the input's shape and dtype.
  std::vector<Tensor> checked(std::vector<Tensor> grads) const {
    const size_t n = next_edges.size();
    bool extra = std::any_of(grads.begin() + std::min(n, grads.size()), grads.end(),
                             [](const Tensor& g) { return g.defined(); });
    KILN_CHECK(grads.size() >= n && !extra, "function ", name_,
               " returned an incorrect number of gradients (expected ", n, ", got ", grads.size(),
               ")");
    grads.resize(n);
    for (size_t i = 0; i < n; ++i) {
      Tensor& g = grads[i];
      KILN_CHECK(input_defined_[i] || !g.defined(), "function ", name_,
                 " returned a gradient different than None at position ", i + 1,
                 ", but the corresponding forward input was not a Variable");
      if (!g.defined() || !next_edges[i].node) {
        g = Tensor();
        continue;
      }
      if (g.shape() != input_shapes_[i]) {
        KILN_CHECK(broadcasts_to(input_shapes_[i], g.shape()), "Function ", name_,
                   " returned an invalid gradient at index ", i, " - got ", g.shape(),
                   " but expected shape compatible with ", input_shapes_[i]);
        g = sum_to(g, input_shapes_[i]);
      }
      if (g.dtype() != input_dtypes_[i]) g = to(g, input_dtypes_[i]);
    }
    return grads;
  }

  std::string name_;
  std::shared_ptr<FunctionContext> ctx_;
  FunctionBackward backward_;
  std::vector<bool> input_defined_;
  std::vector<IntList> input_shapes_, output_shapes_;
  std::vector<DType> input_dtypes_, output_dtypes_;
};

FunctionContext::FunctionContext(const std::vector<Tensor>& inputs) {
  const bool recording = grad_mode_enabled();
  for (const Tensor& in : inputs)
    needs_input_grad_.push_back(recording && in.defined() && in.requires_grad());
}

void FunctionContext::save_for_backward(std::vector<Tensor> tensors) {
  to_save_ = std::move(tensors);
}

void FunctionContext::mark_non_differentiable(std::vector<Tensor> outputs) {
  non_differentiable_.insert(non_differentiable_.end(), outputs.begin(), outputs.end());
}

void FunctionContext::mark_dirty(std::vector<Tensor> inputs) {
  dirty_.insert(dirty_.end(), inputs.begin(), inputs.end());
}

std::vector<Tensor> FunctionContext::saved_tensors() const {
  KILN_CHECK(!released_,
             "trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed): ",
             node_name_, "'s saved tensors were freed by the previous backward");
  if (!saved_now_) return to_save_;  // still in forward
  std::vector<Tensor> out;
  for (size_t i = 0; i < saved_.size(); ++i) {
    const Saved& s = saved_[i];
    if (!s.value.defined()) {
      out.emplace_back();
      continue;
    }
    KILN_CHECK(s.value.version() == s.version,
               "one of the variables needed for gradient computation has been modified by an "
               "inplace operation: saved tensor ",
               i, " of ", node_name_, " is at version ", s.value.version(), "; expected version ",
               s.version, " instead");
    std::shared_ptr<Node> node = node_.lock();
    if (!s.is_output || !node || !grad_mode_enabled()) {
      out.push_back(s.value);
      continue;
    }
    // Differentiating the backward (create_graph): the output must lead
    // back to this node again.
    Tensor linked = detach(s.value);
    set_history(linked, node, s.output_nr);
    out.push_back(linked);
  }
  return out;
}

// `outputs` are the final ones: an output saved by the user is saved as an
// alias (holding it would make output -> node -> ctx -> output a cycle) and
// linked back to the node when a differentiated backward reads it.
void FunctionContext::save_now(const std::vector<Tensor>& outputs, bool linked) {
  saved_.clear();
  for (const Tensor& t : to_save_) {
    if (!t.defined()) {
      saved_.emplace_back();
      continue;
    }
    auto it = std::find_if(outputs.begin(), outputs.end(),
                           [&](const Tensor& out) { return out.is_same(t); });
    if (it == outputs.end()) {
      saved_.push_back(Saved{t, t.version(), false, 0});
      continue;
    }
    int output_nr = int(it - outputs.begin());
    saved_.push_back(Saved{detach(t), t.version(), linked && t.requires_grad(), output_nr});
  }
  to_save_.clear();
  saved_now_ = true;
}

void FunctionContext::release() {
  saved_.clear();
  released_ = true;
}

bool records_function_node() {
  return dispatch_observer() != nullptr && grad_mode_enabled();
}

namespace {

// Where each saved tensor is among the node's inputs and outputs: all its
// backward can read once the function is one node of a graph.
std::vector<SavedSlot> saved_slots(const std::string& name, const std::vector<Tensor>& to_save,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& outputs) {
  std::vector<SavedSlot> slots;
  auto index_in = [](const std::vector<Tensor>& list, const Tensor& t) {
    return size_t(
        std::find_if(list.begin(), list.end(), [&](const Tensor& x) { return x.is_same(t); }) -
        list.begin());
  };
  for (size_t i = 0; i < to_save.size(); ++i) {
    const Tensor& t = to_save[i];
    if (!t.defined()) {
      slots.emplace_back();
      continue;
    }
    if (size_t k = index_in(inputs, t); k < inputs.size()) {
      slots.push_back(SavedSlot{SavedSlot::Input, k});
      continue;
    }
    size_t k = index_in(outputs, t);
    KILN_CHECK(k < outputs.size(), name, ": save_for_backward got a tensor (saved tensor ", i,
               ", shape ", t.shape(),
               ") that is neither an input nor an output of forward. While a graph records with "
               "grad mode on (hybridize, kiln.compile, kiln.jit.trace), ",
               name,
               " is one node whose backward reads only its inputs and outputs: return that "
               "tensor as an extra output (mark_non_differentiable), or compute it again in "
               "backward");
    slots.push_back(SavedSlot{SavedSlot::Output, k});
  }
  return slots;
}

TensorMeta recorded_meta(const Tensor& t) {
  TensorMeta m = meta_of(t);
  m.wrapped_number = false;
  return m;
}

// apply_function's recorded form: the node's inputs are the defined ones.
std::vector<Tensor> apply_as_node(const CustomFunction& fn, const FunctionContext& ctx,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& outputs) {
  std::vector<size_t> positions;
  std::vector<Tensor> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    positions.push_back(i);
    operands.push_back(inputs[i]);
  }
  const size_t arity = inputs.size();
  auto expand = [positions, arity](const std::vector<Tensor>& operands) {
    std::vector<Tensor> all(arity);
    for (size_t k = 0; k < positions.size(); ++k)
      all[positions[k]] = operands[k];
    return all;
  };
  NodeForward forward = [fn, expand](const std::vector<Tensor>& operands) {
    std::vector<Tensor> all = expand(operands);
    FunctionContext again(all);
    return fn.forward(again, all);
  };
  const bool materialize = ctx.materialize_grads();
  NodeBackward backward = [fn, positions, arity, materialize](const std::vector<Tensor>& saved,
                                                              const std::vector<Tensor>& grads,
                                                              const std::vector<bool>& needs) {
    FunctionContext replay({});
    std::vector<bool> needs_all(arity, false);
    for (size_t k = 0; k < positions.size(); ++k)
      needs_all[positions[k]] = needs[k];
    replay.set_needs_input_grad(std::move(needs_all));
    replay.set_materialize_grads(materialize);
    replay.save_for_backward(saved);
    std::vector<Tensor> all = fn.backward(replay, grads);
    std::vector<Tensor> per_operand;
    for (size_t i : positions)
      per_operand.push_back(i < all.size() ? all[i] : Tensor());
    return per_operand;
  };
  return record_function_node(fn.name, ctx, operands, outputs, std::move(forward),
                              std::move(backward));
}

}  // namespace

std::vector<Tensor> record_function_node(const std::string& name, const FunctionContext& ctx,
                                         const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& outputs, NodeForward forward,
                                         NodeBackward backward) {
  KILN_CHECK(ctx.dirty_.empty(), name,
             ": mark_dirty (an input written in place) is not supported while a graph records "
             "with grad mode on (hybridize, kiln.compile, kiln.jit.trace); return a new tensor "
             "instead");
  CustomFunctionCallbacks callbacks;
  callbacks.name = name;
  for (const Tensor& in : inputs) {
    KILN_ASSERT(in.defined(), name, ": a recorded Function's node inputs must be tensors");
    callbacks.inputs.push_back(recorded_meta(in));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.defined(), name, ": forward returned an undefined tensor as output ", i,
               ", which a recorded graph cannot hold");
    callbacks.outputs.push_back(recorded_meta(out));
    callbacks.non_differentiable.push_back(!is_floating(out.dtype()) ||
                                           contains(ctx.non_differentiable_, out));
  }
  callbacks.saved = saved_slots(name, ctx.to_save_, inputs, outputs);
  callbacks.materialize_grads = ctx.materialize_grads_;
  callbacks.forward = [forward = std::move(forward)](const std::vector<Tensor>& operands) {
    NoGradGuard no_grad;
    return forward(operands);
  };
  callbacks.backward = std::move(backward);
  int64_t id = register_custom_function(std::move(callbacks));
  return dispatch_custom_function(id, inputs, outputs);
}

std::vector<Tensor> apply_function(const CustomFunction& fn, const std::vector<Tensor>& inputs) {
  auto ctx = std::make_shared<FunctionContext>(inputs);
  std::vector<Tensor> outputs;
  if (records_function_node()) {
    {
      NoGradGuard no_grad;
      PauseRecording pause;  // its ops are the node's
      outputs = fn.forward(*ctx, inputs);
    }
    return apply_as_node(fn, *ctx, inputs, outputs);
  }
  {
    NoGradGuard no_grad;
    outputs = fn.forward(*ctx, inputs);
  }
  return record_function(fn.name, std::move(ctx), inputs, std::move(outputs), fn.backward);
}

std::vector<Tensor> record_function(const std::string& name, std::shared_ptr<FunctionContext> ctx,
                                    const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    FunctionBackward backward) {
  ctx->node_name_ = name + "Backward";
  const bool differentiable =
      grad_mode_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) {
        return t.defined() && t.requires_grad();
      });
  for (const Tensor& d : ctx->dirty_) {
    KILN_CHECK(contains(outputs, d), name,
               ": some elements marked as dirty during the forward method were not returned as "
               "output");
    KILN_CHECK(!differentiable || !(is_leaf(d) && d.requires_grad()), name,
               ": a leaf Variable that requires grad is being used in an in-place operation");
  }
  std::vector<bool> carries_grad(outputs.size(), false);
  std::vector<Tensor> seen;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined()) continue;
    carries_grad[i] = is_floating(out.dtype()) && !contains(ctx->non_differentiable_, out);
    // Only a fresh tensor (or a dirty input) may take this node as history.
    bool dirty = contains(ctx->dirty_, out);
    bool fresh = !contains(inputs, out) && !out.requires_grad() && !contains(seen, out);
    seen.push_back(out);
    if (!dirty && !fresh) out = detach(out);
  }
  ctx->non_differentiable_.clear();
  ctx->dirty_.clear();
  if (!differentiable) {
    ctx->save_now(outputs, false);
    return outputs;
  }
  auto node = std::make_shared<FunctionNode>(name, ctx, std::move(backward), inputs, outputs);
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs)
    node->next_edges.push_back(gradient_edge(in));  // before a dirty input's history changes
  ctx->node_ = node;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (carries_grad[i]) set_history(outputs[i], node, int(i));
  }
  ctx->save_now(outputs, true);
  return outputs;
}

}  // namespace kiln
