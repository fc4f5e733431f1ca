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

void check_function_recordable(const std::string& name) {
  if (dispatch_observer() == nullptr || !grad_mode_enabled()) return;
  KILN_CHECK(false, name,
             ": a custom autograd Function was called while kiln records a graph with grad mode "
             "on (hybridize, kiln.compile, kiln.jit.trace): the compiled graph would "
             "differentiate ",
             name,
             "'s forward ops instead of calling its backward. Train this model eagerly "
             "(hybridize(active=False)), or record it under kiln.no_grad() for inference");
}

std::vector<Tensor> apply_function(const CustomFunction& fn, const std::vector<Tensor>& inputs) {
  check_function_recordable(fn.name);
  auto ctx = std::make_shared<FunctionContext>(inputs);
  std::vector<Tensor> outputs;
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
