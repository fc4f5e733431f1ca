// Translations of ONNX's elementwise, reduction and linear-algebra ops that
// are more than one kiln op of the same inputs (the one-to-one ones, Neg,
// Add, LeakyRelu, MatMul, ..., are declared in their OpDefs:
// import_generic.cpp; shapes and indexing: import_shape_ops.cpp). Inputs
// that ONNX passes as tensors but kiln takes as attributes (axes, bounds)
// must be known at import time.
#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

constexpr char kAdd[] = "add", kMul[] = "mul", kNe[] = "ne";

// ONNX divides integers with truncation: the floor quotient, one more where
// a nonzero remainder and the signs of a and b differ.
void div(const Node& node, ImportContext& c) {
  Value* a = c.input(node, 0);
  Value* b = c.input(node, 1);
  if (is_floating(a->dtype())) return define(node, c, c.emit("div", {a, b}));
  Value* zero = c.constant(full({}, int64_t(0), a->dtype()));
  Value* floor = c.emit("floor_divide", {a, b});
  Value* inexact = c.emit("ne", {c.emit("fmod", {a, b}), zero});
  Value* signs_differ = c.emit("ne", {c.emit("lt", {a, zero}), c.emit("lt", {b, zero})});
  Value* adjust = c.emit("cast", {c.emit("mul", {inexact, signs_differ})}, {{"dtype", a->dtype()}});
  define(node, c, c.emit("add", {floor, adjust}));
}

// Pow's exponent may have another type than its base; the result has the
// base's.
void pow(const Node& node, ImportContext& c) {
  Value* base = c.input(node, 0);
  Value* exponent = c.input(node, 1);
  if (exponent->dtype() != base->dtype())
    exponent = c.emit("cast", {exponent}, {{"dtype", base->dtype()}});
  define(node, c, c.emit("pow", {base, exponent}));
}

// And is mul on bools, Or is add, Xor is ne.
void logical_and(const Node& node, ImportContext& c) {
  binary<kMul>(node, c);
}
void logical_or(const Node& node, ImportContext& c) {
  binary<kAdd>(node, c);
}
void logical_xor(const Node& node, ImportContext& c) {
  binary<kNe>(node, c);
}

void identity(const Node& node, ImportContext& c) {
  define(node, c, c.input(node, 0));
}

// Max, Min, Sum and Mean take any number of inputs.
void variadic(const Node& node, ImportContext& c, const char* op) {
  Value* result = c.input(node, 0);
  for (int i = 1; i < node.input_size(); ++i)
    result = c.emit(op, {result, c.input(node, i)});
  if (node.op_type() == "Mean")
    result =
        c.emit("div", {result, c.constant(full({}, double(node.input_size()), result->dtype()))});
  define(node, c, result);
}

void max(const Node& node, ImportContext& c) {
  variadic(node, c, "maximum");
}
void min(const Node& node, ImportContext& c) {
  variadic(node, c, "minimum");
}
void sum(const Node& node, ImportContext& c) {
  variadic(node, c, "add");
}

void softplus(const Node& node, ImportContext& c) {
  define(node, c, c.emit("softplus", {c.input(node, 0)}, {{"beta", 1.0}, {"threshold", 20.0}}));
}

// Clip's bounds are inputs from opset 11, attributes before. Known bounds
// make one clamp; bounds computed at run time a maximum and a minimum.
void clip(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Attrs attrs;
  std::vector<std::pair<const char*, Value*>> runtime;
  auto bound = [&](int input, const char* name) {
    Value* value = c.input(node, input);
    if (c.is_constant(value)) {
      attrs.set(name, value->data().item<double>());
    } else if (value) {
      runtime.emplace_back(name, value);
    } else if (has_attr(node, name)) {
      attrs.set(name, double(attr_float(node, name, 0.f)));
    }
  };
  bound(1, "min");
  bound(2, "max");
  if (!attrs.items().empty()) x = c.emit("clamp", {x}, attrs);
  for (const auto& [name, value] : runtime)
    x = c.emit(std::string(name) == "min" ? "maximum" : "minimum", {x, value});
  define(node, c, x);
}

// ---- shapes ----

void transpose(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  IntList perm;
  for (int64_t i = rank_of(x) - 1; i >= 0; --i)
    perm.push_back(i);
  perm = attr_ints(node, "perm", perm);
  define(node, c, c.emit("permute", {x}, {{"dims", perm}}));
}

void constant(const Node& node, ImportContext& c) {
  if (const pb::AttributeProto* value = find_attr(node, "value")) {
    define(node, c, c.constant(tensor_from_proto(value->t(), c.folder())));
  } else if (const pb::AttributeProto* f = find_attr(node, "value_float")) {
    define(node, c, c.constant(full({}, double(f->f()), DType::Float32)));
  } else if (const pb::AttributeProto* i = find_attr(node, "value_int")) {
    define(node, c, c.constant(full({}, i->i(), DType::Int64)));
  } else if (const pb::AttributeProto* ints = find_attr(node, "value_ints")) {
    Tensor data = empty({ints->ints_size()}, DType::Int64);
    for (int k = 0; k < ints->ints_size(); ++k)
      data.data<int64_t>()[k] = ints->ints(k);
    define(node, c, c.constant(data));
  } else if (const pb::AttributeProto* floats = find_attr(node, "value_floats")) {
    Tensor data = empty({floats->floats_size()}, DType::Float32);
    for (int k = 0; k < floats->floats_size(); ++k)
      data.data<float>()[k] = floats->floats(k);
    define(node, c, c.constant(data));
  } else {
    KILN_CHECK(false, "onnx import: Constant without a value kiln reads (sparse or string)");
  }
}

// ---- reductions ----

void reduce(const Node& node, ImportContext& c, const char* op, int axes_input) {
  Value* x = c.input(node, 0);
  IntList axes = axes_input > 0 ? axes_of(node, c, axes_input, {}) : attr_ints(node, "axes", {});
  if (axes_input > 0 && !c.input(node, axes_input)) axes = attr_ints(node, "axes", {});
  bool keepdim = attr_int(node, "keepdims", 1) != 0;
  if (axes.empty() && attr_int(node, "noop_with_empty_axes", 0)) return define(node, c, x);
  if (x->shape().empty()) return define(node, c, x);
  define(node, c, c.emit(op, {x}, {{"dims", axes}, {"keepdim", keepdim}}));
}

void reduce_sum(const Node& node, ImportContext& c) {
  reduce(node, c, "sum", c.opset() >= 13 ? 1 : 0);
}
void reduce_mean(const Node& node, ImportContext& c) {
  reduce(node, c, "mean", c.opset() >= 18 ? 1 : 0);
}
void reduce_max(const Node& node, ImportContext& c) {
  reduce(node, c, "amax", c.opset() >= 18 ? 1 : 0);
}
void reduce_min(const Node& node, ImportContext& c) {
  reduce(node, c, "amin", c.opset() >= 18 ? 1 : 0);
}
void reduce_prod(const Node& node, ImportContext& c) {
  reduce(node, c, "prod", c.opset() >= 18 ? 1 : 0);
}

// select_last_index=1 asks for the last of equal extremes: the first one
// over the axis reversed, counted back from the end.
void arg_extreme(const Node& node, ImportContext& c, const char* op) {
  Value* x = c.input(node, 0);
  int64_t axis = wrap(attr_int(node, "axis", 0), rank_of(x));
  Attrs attrs = {{"dim", axis}, {"keepdim", attr_int(node, "keepdims", 1) != 0}};
  if (!attr_int(node, "select_last_index", 0)) return define(node, c, c.emit(op, {x}, attrs));
  int64_t size = concrete_size(node, 0, x, axis, node.op_type() + " with select_last_index");
  Tensor reversed = empty({size}, DType::Int64);
  for (int64_t i = 0; i < size; ++i)
    reversed.data<int64_t>()[i] = size - 1 - i;
  Value* flipped = c.emit("index_select", {x, c.constant(reversed)}, {{"dim", axis}});
  Value* index = c.emit(op, {flipped}, attrs);
  define(node, c, c.emit("sub", {c.constant(full({}, size - 1, DType::Int64)), index}));
}

void argmax(const Node& node, ImportContext& c) {
  arg_extreme(node, c, "argmax");
}
void argmin(const Node& node, ImportContext& c) {
  arg_extreme(node, c, "argmin");
}

// ---- linear algebra ----

Value* transposed(ImportContext& c, Value* x) {
  return c.emit("permute", {x}, {{"dims", IntList{1, 0}}});
}

// Gemm: alpha * A' B' + beta * C. The common layer form (B transposed,
// alpha = beta = 1, C a vector) is kiln's linear.
void gemm(const Node& node, ImportContext& c) {
  Value* a = c.input(node, 0);
  Value* b = c.input(node, 1);
  Value* bias = c.input(node, 2);
  if (attr_int(node, "transA", 0)) a = transposed(c, a);
  double alpha = attr_float(node, "alpha", 1.f), beta = attr_float(node, "beta", 1.f);
  bool trans_b = attr_int(node, "transB", 0) != 0;
  if (trans_b && alpha == 1.0 && (!bias || (beta == 1.0 && bias->shape().size() == 1))) {
    std::vector<Value*> inputs = {a, b};
    if (bias) inputs.push_back(bias);
    return define(node, c, c.emit("linear", inputs));
  }
  if (trans_b) b = transposed(c, b);
  Value* product = c.emit("matmul", {a, b});
  if (alpha != 1.0)
    product = c.emit("mul", {product, c.constant(full({}, alpha, product->dtype()))});
  if (bias) {
    Value* scaled =
        beta == 1.0 ? bias : c.emit("mul", {bias, c.constant(full({}, beta, bias->dtype()))});
    product = c.emit("add", {product, scaled});
  }
  define(node, c, product);
}

}  // namespace

void add_basic_importers(Table& table) {
  table["Softplus"] = softplus;
  table["Clip"] = clip;
  table["Identity"] = identity;
  table["Div"] = div;
  table["Pow"] = pow;
  table["And"] = logical_and;
  table["Or"] = logical_or;
  table["Xor"] = logical_xor;
  table["Max"] = max;
  table["Min"] = min;
  table["Sum"] = sum;
  table["Mean"] = sum;
  table["Transpose"] = transpose;
  table["Constant"] = constant;
  table["ReduceSum"] = reduce_sum;
  table["ReduceMean"] = reduce_mean;
  table["ReduceMax"] = reduce_max;
  table["ReduceMin"] = reduce_min;
  table["ReduceProd"] = reduce_prod;
  table["ArgMax"] = argmax;
  table["ArgMin"] = argmin;
  table["Gemm"] = gemm;
}

}  // namespace kiln::onnx
