// The ai.onnx.preview.training domain: Adagrad, Adam and Momentum, one
// optimizer step each, as the spec's pseudo code in kiln's elementwise ops.
//
// Inputs: R (the learning rate) and T (the update count, int64), both
// scalars read at run time, then for n optimized tensors the n X, the n G
// (gradients) and the n of each accumulator; outputs the n new X, then each
// accumulator's n new values. Every tensor is updated on its own (the spec's
// "concatenate them" reading gives the same elementwise result), and each
// output keeps its input's dtype.
//
//   Adagrad   r = R / (1 + T decay_factor); G' = norm_coefficient X + G
//             H_new = H + G'^2; X_new = X - r G' / (sqrt(H_new) + epsilon)
//   Adam      G' = norm_coefficient X + G
//             V_new = alpha V + (1 - alpha) G'
//             H_new = beta H + (1 - beta) G'^2
//             R' = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R
//             X_new = (1 - norm_coefficient_post) (X - R' V_new / (sqrt(H_new) + epsilon))
//   Momentum  G' = norm_coefficient X + G; b = T > 0 ? beta : 1
//             V_new = alpha V + b G'
//             standard: X_new = X - R V_new
//             nesterov: X_new = X - R (G' + alpha V_new)
#include <string>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// The step's inputs: R, T, and per optimized tensor its X, G and accumulators.
struct Step {
  ImportContext& c;
  Value* r;
  Value* t;  // as R's dtype
  Value* t_positive;
  int64_t count;  // optimized tensors

  Step(const Node& node, ImportContext& c, int accumulators) : c(c) {
    const int variadic = node.input_size() - 2;
    KILN_CHECK(variadic > 0 && variadic % (2 + accumulators) == 0, "onnx import: ", node.op_type(),
               " '", node.name(), "' expects R, T and ", 2 + accumulators,
               " groups of equally many tensors (X, G, ...), got ", node.input_size(), " inputs");
    count = variadic / (2 + accumulators);
    r = c.input(node, 0);
    Value* count_t = c.input(node, 1);
    t_positive = c.emit("gt", {count_t, c.constant(full({}, int64_t(0), DType::Int64))});
    t = c.emit("cast", {count_t}, {{"dtype", r->dtype()}});
  }

  // Input `group` (0: X, 1: G, 2...: accumulators) of tensor i.
  Value* in(const Node& node, int group, int64_t i) {
    return c.input(node, int(2 + group * count + i));
  }
  Value* number(double value) { return c.constant(full({}, value, r->dtype())); }
  Value* op(const std::string& name, std::vector<Value*> inputs) { return c.emit(name, inputs); }
  Value* regularized(Value* x, Value* g, double norm_coefficient) {
    return op("add", {op("mul", {number(norm_coefficient), x}), g});
  }
  // Output `group` of tensor i, in the dtype of `like`.
  void define_output(const Node& node, int group, int64_t i, Value* value, const Value* like) {
    if (value->dtype() != like->dtype())
      value = c.emit("cast", {value}, {{"dtype", like->dtype()}});
    c.define(node.output(int(group * count + i)), value);
  }
};

void adagrad(const Node& node, ImportContext& c) {
  Step s(node, c, 1);
  const double decay = attr_float(node, "decay_factor", 0.f);
  const double epsilon = attr_float(node, "epsilon", 1e-6f);
  const double norm_coefficient = attr_float(node, "norm_coefficient", 0.f);
  Value* rate = s.op("div", {s.r, s.op("add", {s.number(1), s.op("mul", {s.t, s.number(decay)})})});
  for (int64_t i = 0; i < s.count; ++i) {
    Value *x = s.in(node, 0, i), *g = s.in(node, 1, i), *h = s.in(node, 2, i);
    Value* g_reg = s.regularized(x, g, norm_coefficient);
    Value* h_new = s.op("add", {h, s.op("mul", {g_reg, g_reg})});
    Value* adaptive = s.op("add", {s.op("sqrt", {h_new}), s.number(epsilon)});
    Value* x_new = s.op("sub", {x, s.op("div", {s.op("mul", {rate, g_reg}), adaptive})});
    s.define_output(node, 0, i, x_new, x);
    s.define_output(node, 1, i, h_new, h);
  }
}

void adam(const Node& node, ImportContext& c) {
  Step s(node, c, 2);
  const double alpha = attr_float(node, "alpha", 0.9f), beta = attr_float(node, "beta", 0.999f);
  const double epsilon = attr_float(node, "epsilon", 1e-6f);
  const double norm_coefficient = attr_float(node, "norm_coefficient", 0.f);
  const double norm_post = attr_float(node, "norm_coefficient_post", 0.f);
  // R sqrt(1 - beta^T) / (1 - alpha^T) once T > 0 (at T = 0 it is 0 / 0).
  Value* beta_t = s.op("pow", {s.number(beta), s.t});
  Value* alpha_t = s.op("pow", {s.number(alpha), s.t});
  Value* corrected =
      s.op("div", {s.op("mul", {s.r, s.op("sqrt", {s.op("sub", {s.number(1), beta_t})})}),
                   s.op("sub", {s.number(1), alpha_t})});
  Value* rate = s.op("where", {s.t_positive, corrected, s.r});
  for (int64_t i = 0; i < s.count; ++i) {
    Value *x = s.in(node, 0, i), *g = s.in(node, 1, i);
    Value *v = s.in(node, 2, i), *h = s.in(node, 3, i);
    Value* g_reg = s.regularized(x, g, norm_coefficient);
    Value* v_new =
        s.op("add", {s.op("mul", {s.number(alpha), v}), s.op("mul", {s.number(1 - alpha), g_reg})});
    Value* h_new = s.op("add", {s.op("mul", {s.number(beta), h}),
                                s.op("mul", {s.number(1 - beta), s.op("mul", {g_reg, g_reg})})});
    Value* h_sqrt = s.op("add", {s.op("sqrt", {h_new}), s.number(epsilon)});
    Value* x_new = s.op("sub", {x, s.op("div", {s.op("mul", {rate, v_new}), h_sqrt})});
    s.define_output(node, 0, i, s.op("mul", {s.number(1 - norm_post), x_new}), x);
    s.define_output(node, 1, i, v_new, v);
    s.define_output(node, 2, i, h_new, h);
  }
}

void momentum(const Node& node, ImportContext& c) {
  for (const char* required : {"alpha", "beta", "mode", "norm_coefficient"})
    KILN_CHECK(has_attr(node, required), "onnx import: Momentum '", node.name(),
               "' lacks its required attribute '", required, "'");
  const std::string mode = attr_string(node, "mode", "");
  KILN_CHECK_VALUE(mode == "standard" || mode == "nesterov", "onnx import: Momentum '", node.name(),
                   "' has mode '", mode, "' (expected 'standard' or 'nesterov')");
  Step s(node, c, 1);
  const double alpha = attr_float(node, "alpha", 0.f), beta = attr_float(node, "beta", 0.f);
  const double norm_coefficient = attr_float(node, "norm_coefficient", 0.f);
  Value* gradient_scale = s.op("where", {s.t_positive, s.number(beta), s.number(1)});
  for (int64_t i = 0; i < s.count; ++i) {
    Value *x = s.in(node, 0, i), *g = s.in(node, 1, i), *v = s.in(node, 2, i);
    Value* g_reg = s.regularized(x, g, norm_coefficient);
    Value* v_new =
        s.op("add", {s.op("mul", {s.number(alpha), v}), s.op("mul", {gradient_scale, g_reg})});
    Value* direction =
        mode == "standard" ? v_new : s.op("add", {g_reg, s.op("mul", {s.number(alpha), v_new})});
    s.define_output(node, 0, i, s.op("sub", {x, s.op("mul", {s.r, direction})}), x);
    s.define_output(node, 1, i, v_new, v);
  }
}

}  // namespace

void add_training_importers(Table& table) {
  table["ai.onnx.preview.training:Adagrad"] = adagrad;
  table["ai.onnx.preview.training:Adam"] = adam;
  table["ai.onnx.preview.training:Momentum"] = momentum;
}

}  // namespace kiln::onnx
