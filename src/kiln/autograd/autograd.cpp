#include "kiln/autograd/autograd.h"

#include "kiln/autograd/engine.h"
#include "kiln/autograd/node.h"
#include "kiln/core/factory.h"
#include "kiln/ops/dispatch.h"

namespace kiln {
namespace {

thread_local bool t_grad_mode = true;

void check_differentiable(const Tensor& t, const char* what) {
  KILN_CHECK(t.defined(), what, ": got an undefined tensor");
  KILN_CHECK(t.requires_grad(), what,
             ": element 0 of tensors does not require grad and does "
             "not have a grad_fn");
}

Tensor seed_gradient(const Tensor& root, const Tensor& grad_output) {
  if (grad_output.defined()) {
    KILN_CHECK(grad_output.shape() == root.shape(),
               "backward: mismatch in shape: grad_output "
               "has shape ",
               grad_output.shape(), " and output has shape ", root.shape());
    return grad_output;
  }
  KILN_CHECK(root.numel() == 1,
             "backward: grad can be implicitly created only for scalar "
             "outputs; got an output of shape ",
             root.shape());
  return ones(root.shape(), root.dtype());
}

}  // namespace

// Installing the hooks is explicit (no static constructor): requires_grad_()
// calls it, so only a tensor made with TensorOptions::requires_grad before
// any such call needs kiln::init_autograd() first (dispatch refuses the op,
// naming it, when the hooks are missing).
void init_autograd() {
  set_autograd_hook(record_op);
  set_inplace_check(check_inplace);
}

bool grad_mode_enabled() {
  return t_grad_mode;
}
void set_grad_mode(bool enabled) {
  t_grad_mode = enabled;
}

AutogradMetaImpl* autograd_meta(const Tensor& t) {
  return static_cast<AutogradMetaImpl*>(t.impl()->autograd.get());
}

AutogradMetaImpl& ensure_autograd_meta(const Tensor& t) {
  if (!t.impl()->autograd) t.impl()->autograd = std::make_shared<AutogradMetaImpl>();
  return *autograd_meta(t);
}

const Tensor& requires_grad_(const Tensor& t, bool requires_grad) {
  init_autograd();
  KILN_CHECK(t.defined(), "requires_grad_: got an undefined tensor");
  KILN_CHECK(!requires_grad || is_floating(t.dtype()),
             "only tensors of floating point dtype "
             "can require gradients, got ",
             t.dtype());
  KILN_CHECK(is_leaf(t) || requires_grad,
             "you can only change requires_grad flags of leaf "
             "variables");
  t.impl()->requires_grad = requires_grad;
  return t;
}

bool is_leaf(const Tensor& t) {
  AutogradMetaImpl* meta = autograd_meta(t);
  return meta == nullptr || meta->grad_fn == nullptr;
}

Tensor grad(const Tensor& t) {
  AutogradMetaImpl* meta = autograd_meta(t);
  return meta ? meta->grad : Tensor();
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    KILN_CHECK(g.shape() == t.shape(), "set_grad: assigned grad has shape ", g.shape(),
               ", the tensor has shape ", t.shape());
  }
  if (!g.defined() && !autograd_meta(t)) return;
  ensure_autograd_meta(t).grad = g;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  AutogradMetaImpl* meta = autograd_meta(t);
  return meta ? meta->grad_fn : nullptr;
}

std::string grad_fn_name(const Tensor& t) {
  std::shared_ptr<Node> fn = grad_fn(t);
  return fn ? fn->name() : "";
}

Tensor detach(const Tensor& t) {
  return make_view(t, t.shape(), t.strides(), t.offset());
}

void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph, bool create_graph) {
  check_differentiable(root, "backward");
  Edge edge = gradient_edge(root);
  run_backward({edge}, {seed_gradient(root, grad_output)}, retain_graph || create_graph,
               create_graph, {});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "grad: got ",
             grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Edge> roots;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_differentiable(outputs[i], "grad");
    roots.push_back(gradient_edge(outputs[i]));
    seeds.push_back(seed_gradient(outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i]));
  }
  std::vector<Edge> captures;
  for (const Tensor& in : inputs) {
    check_differentiable(in, "grad");
    captures.push_back(gradient_edge(in));
  }
  std::vector<Tensor> result =
      run_backward(roots, seeds, retain_graph || create_graph, create_graph, captures);
  for (size_t i = 0; i < result.size(); ++i) {
    KILN_CHECK(result[i].defined() || allow_unused,
               "grad: one of the differentiated tensors "
               "(input ",
               i,
               ") appears to not have been used in the graph; pass "
               "allow_unused=true if this is the desired behavior");
  }
  return result;
}

}  // namespace kiln
