// ONNX translations of the elementwise ops and reductions whose ONNX form
// is more than one op or takes other inputs (the one-to-one ones, neg, add,
// leaky_relu, ..., are declared in their OpDefs: export_generic.cpp). kiln's
// binary ops accept operands of different dtypes (PyTorch's promotion);
// ONNX's do not, so operands are cast to the dtype the op computes in first.
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

void rsqrt(const Node& node, ExportContext& c) {
  c.node_for(node.output(), "Reciprocal", {c.temp("Sqrt", {c.name(node.input(0))})});
}

// gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2))), or with approximate="tanh":
// x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))). ONNX has Gelu
// only from opset 20.
void gelu(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  std::string x = c.name(node.input(0));
  std::string inner;
  if (node.attrs().get_string("approximate") == "tanh") {
    std::string cube = c.temp("Mul", {x, c.temp("Mul", {x, x})});
    std::string poly = c.temp("Add", {x, c.temp("Mul", {cube, c.scalar(0.044715, dtype)})});
    inner = c.temp("Tanh", {c.temp("Mul", {poly, c.scalar(std::sqrt(2.0 / M_PI), dtype)})});
  } else {
    inner = c.temp("Erf", {c.temp("Mul", {x, c.scalar(M_SQRT1_2, dtype)})});
  }
  std::string half_x = c.temp("Mul", {x, c.scalar(0.5, dtype)});
  c.node_for(node.output(), "Mul", {half_x, c.temp("Add", {inner, c.scalar(1.0, dtype)})});
}

// softplus(x) = x where beta * x > threshold, else log(1 + exp(beta x)) / beta.
void softplus(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  std::string x = c.name(node.input(0));
  std::string scaled = c.temp("Mul", {x, c.scalar(node.attrs().get_float("beta"), dtype)});
  std::string soft = c.temp(
      "Div", {c.temp("Softplus", {scaled}), c.scalar(node.attrs().get_float("beta"), dtype)});
  std::string linear =
      c.temp("Greater", {scaled, c.scalar(node.attrs().get_float("threshold"), dtype)});
  c.node_for(node.output(), "Where", {linear, x, soft});
}

void clamp(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  auto bound = [&](const char* name) -> std::string {
    const AttrValue& value = node.attrs().get(name);
    if (std::holds_alternative<std::monostate>(value)) return "";
    return c.scalar(node.attrs().get_float(name), dtype);
  };
  c.node_for(node.output(), "Clip", {c.name(node.input(0)), bound("min"), bound("max")});
}

void ne(const Node& node, ExportContext& c) {
  DType dtype = binary_compute_dtype(node);
  std::string equal =
      c.temp("Equal", {c.as_dtype(node.input(0), dtype), c.as_dtype(node.input(1), dtype)});
  c.node_for(node.output(), "Not", {equal});
}

// ---- reductions ----

std::vector<int64_t> reduce_axes(const Node& node) {
  const IntList& dims = node.attrs().get_ints("dims");
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// The input in the dtype the reduction accumulates in (its `dtype` attr).
std::string reduce_input(const Node& node, ExportContext& c) {
  return c.as_dtype(node.input(0), node.output()->dtype());
}

// ReduceSum takes its axes as an input from opset 13, the others from 18.
// A 0-d input reduces to itself; bools reduce as int32.
void reduce(const Node& node, ExportContext& c, const std::string& op_type, bool axes_as_input) {
  DType dtype = node.output()->dtype();
  if (node.input(0)->shape().empty()) {
    c.node_for(node.output(), "Identity", {reduce_input(node, c)});
    return;
  }
  std::vector<int64_t> axes = reduce_axes(node);
  std::vector<std::string> inputs = {dtype == DType::Bool ? c.as_dtype(node.input(0), DType::Int32)
                                                          : reduce_input(node, c)};
  if (axes_as_input && !axes.empty()) inputs.push_back(c.ints(axes));
  pb::NodeProto* made = nullptr;
  std::string reduced = c.temp(op_type, inputs, &made);
  set_attr(*made, "keepdims", int64_t(node.attrs().get_bool("keepdim")));
  if (!axes_as_input && !axes.empty()) set_attr(*made, "axes", axes);
  if (dtype == DType::Bool) {
    auto& cast = c.node_for(node.output(), "Cast", {reduced});
    set_attr(cast, "to", int64_t(onnx_dtype(DType::Bool)));
    return;
  }
  c.node_for(node.output(), "Identity", {reduced});
}

void sum(const Node& node, ExportContext& c) {
  reduce(node, c, "ReduceSum", true);
}
void mean(const Node& node, ExportContext& c) {
  reduce(node, c, "ReduceMean", false);
}
void prod(const Node& node, ExportContext& c) {
  reduce(node, c, "ReduceProd", false);
}
void amax(const Node& node, ExportContext& c) {
  reduce(node, c, "ReduceMax", false);
}
void amin(const Node& node, ExportContext& c) {
  reduce(node, c, "ReduceMin", false);
}

// max/min over one dim: the values and the indices (the first one, as kiln
// and PyTorch on CPU return).
void max_min_dim(const Node& node, ExportContext& c, const char* reduce_op, const char* arg_op) {
  int64_t dim = node.attrs().get_int("dim");
  int64_t keepdim = node.attrs().get_bool("keepdim");
  std::string x = c.name(node.input(0));
  if (node.input(0)->shape().empty()) {  // a 0-d input: itself, at index 0
    c.node_for(node.output(0), "Identity", {x});
    c.node_for(node.output(1), "Identity", {c.initializer(full({}, int64_t(0), DType::Int64))});
    return;
  }
  bool is_bool = node.input(0)->dtype() == DType::Bool;
  if (is_bool) x = c.cast(x, DType::Int32);
  std::string value_name = is_bool ? c.fresh("t") : "";
  auto& values =
      is_bool ? c.node(reduce_op, {x}, {value_name}) : c.node_for(node.output(0), reduce_op, {x});
  set_attr(values, "axes", std::vector<int64_t>{dim});
  set_attr(values, "keepdims", keepdim);
  auto& indices = c.node_for(node.output(1), arg_op, {x});
  set_attr(indices, "axis", dim);
  set_attr(indices, "keepdims", keepdim);
  if (is_bool) {
    auto& cast = c.node_for(node.output(0), "Cast", {value_name});
    set_attr(cast, "to", int64_t(onnx_dtype(DType::Bool)));
  }
}

void max_dim(const Node& node, ExportContext& c) {
  max_min_dim(node, c, "ReduceMax", "ArgMax");
}
void min_dim(const Node& node, ExportContext& c) {
  max_min_dim(node, c, "ReduceMin", "ArgMin");
}

// argmax/argmin; without a dim over the flattened input.
void arg_extreme(const Node& node, ExportContext& c, const char* op_type) {
  const AttrValue& dim = node.attrs().get("dim");
  std::string x = c.name(node.input(0));
  int64_t axis = 0;
  bool flat = std::holds_alternative<std::monostate>(dim);
  if (flat) {
    x = c.temp("Reshape", {x, c.ints({-1})});
  } else {
    axis = node.attrs().get_int("dim");
  }
  bool keepdim = node.attrs().get_bool("keepdim");
  if (!flat) {
    auto& made = c.node_for(node.output(), op_type, {x});
    set_attr(made, "axis", axis);
    set_attr(made, "keepdims", int64_t(keepdim));
    return;
  }
  pb::NodeProto* made = nullptr;
  std::string index = c.temp(op_type, {x}, &made);
  set_attr(*made, "axis", int64_t(0));
  set_attr(*made, "keepdims", int64_t(0));
  std::vector<int64_t> shape = static_shape(node, node.output());
  c.node_for(node.output(), "Reshape", {index, c.ints(shape)});
}

void argmax(const Node& node, ExportContext& c) {
  arg_extreme(node, c, "ArgMax");
}
void argmin(const Node& node, ExportContext& c) {
  arg_extreme(node, c, "ArgMin");
}

// var = sum((x - mean)^2) / (n - correction); std = sqrt(var).
std::string variance(const Node& node, ExportContext& c) {
  const jit::Value* input = node.input(0);
  DType dtype = node.output()->dtype();
  std::vector<int64_t> axes = reduce_axes(node);
  const DimList& input_shape = input->shape();
  Dim count = 1;
  if (axes.empty()) {
    for (const Dim& dim : input_shape)
      count *= dim;
  } else {
    for (int64_t axis : axes)
      count *= input_shape[size_t(axis < 0 ? axis + int64_t(input_shape.size()) : axis)];
  }
  std::string x = c.name(input);
  pb::NodeProto* made = nullptr;
  std::string mean = c.temp("ReduceMean", {x}, &made);
  set_attr(*made, "keepdims", int64_t(1));
  if (!axes.empty()) set_attr(*made, "axes", axes);
  std::string centered = c.temp("Sub", {x, mean});
  std::vector<std::string> sum_inputs = {c.temp("Mul", {centered, centered})};
  if (!axes.empty()) sum_inputs.push_back(c.ints(axes));
  std::string total = c.temp("ReduceSum", sum_inputs, &made);
  set_attr(*made, "keepdims", int64_t(node.attrs().get_bool("keepdim")));
  Dim divisor = count - node.attrs().get_int("correction");
  if (divisor.is_static()) {
    double value = double(divisor.static_value());
    return c.temp("Div", {total, c.scalar(value > 0 ? value : 0.0, dtype)});
  }
  // A symbolic count: max(n - correction, 0) computed in the graph, as a 0-d
  // value of the output's dtype.
  std::string positive = c.temp("Max", {c.size(divisor), c.ints({0})});
  std::string scalar = c.temp("Reshape", {c.cast(positive, dtype), c.ints({})});
  return c.temp("Div", {total, scalar});
}

void var(const Node& node, ExportContext& c) {
  c.node_for(node.output(), "Identity", {variance(node, c)});
}

void std_dev(const Node& node, ExportContext& c) {
  c.node_for(node.output(), "Sqrt", {variance(node, c)});
}

void softmax(const Node& node, ExportContext& c, const char* op_type) {
  if (node.input(0)->shape().empty()) {  // over one element: as a 1-element vector
    std::string vector = c.temp("Reshape", {c.name(node.input(0)), c.ints({1})});
    pb::NodeProto* made = nullptr;
    std::string result = c.temp(op_type, {vector}, &made);
    set_attr(*made, "axis", int64_t(0));
    c.node_for(node.output(), "Reshape", {result, c.ints({})});
    return;
  }
  auto& made = c.node_for(node.output(), op_type, {c.name(node.input(0))});
  set_attr(made, "axis", node.attrs().get_int("dim"));
}

void softmax_op(const Node& node, ExportContext& c) {
  softmax(node, c, "Softmax");
}
void log_softmax(const Node& node, ExportContext& c) {
  softmax(node, c, "LogSoftmax");
}

// fill(x): a tensor of x's shape holding one value.
void fill(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  const AttrValue& int_value = node.attrs().get("int_value");
  double value = std::holds_alternative<std::monostate>(int_value)
                     ? node.attrs().get_float("value")
                     : double(node.attrs().get_int("int_value"));
  std::string shape = c.temp("Shape", {c.name(node.input(0))});
  c.node_for(node.output(), "Expand", {c.scalar(value, dtype), shape});
}

}  // namespace

void add_elementwise_exporters(Table& table) {
  table["rsqrt"] = rsqrt;
  table["gelu"] = gelu;
  table["softplus"] = softplus;
  table["clamp"] = clamp;
  table["fill"] = fill;
  table["ne"] = ne;
  table["sum"] = sum;
  table["mean"] = mean;
  table["prod"] = prod;
  table["amax"] = amax;
  table["amin"] = amin;
  table["max"] = max_dim;
  table["min"] = min_dim;
  table["argmax"] = argmax;
  table["argmin"] = argmin;
  table["var"] = var;
  table["std"] = std_dev;
  table["softmax"] = softmax_op;
  table["log_softmax"] = log_softmax;
}

}  // namespace kiln::onnx
