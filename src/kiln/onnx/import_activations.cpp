// Translations of ONNX's activations, normalizations and tensor generators
// that are not one kiln op of the same name into kiln ops.
//
//   Hardmax                    -> a 1 scattered at argmax into zeros
//   Shrink, ThresholdedRelu    -> where
//   Softsign, Celu, HardSwish, Mish, Gelu -> their formulas (gelu: kiln's gelu)
//   MeanVarianceNormalization  -> (x - mean) / (sqrt(var) + 1e-9)
//   LRN                        -> x / (bias + alpha * avg of squares)^beta,
//                                 the average an avg_pool2d over channels
//   InstanceNormalization      -> layer_norm over the spatial axes, then
//                                 the per-channel scale and bias
//   GroupNormalization         -> layer_norm over each group's [C/G, ...],
//                                 then the per-channel scale and bias
//   LpNormalization            -> x / (its L1 or L2 norm), 0 for a zero norm
//   CastLike                   -> cast to the second input's dtype
//   EyeLike                    -> column index - row index == k, the indices
//                                 cumulative sums of ones
//   Hann/Hamming/BlackmanWindow -> a constant (its size must be known)
//   Bernoulli, RandomUniform(Like), RandomNormal(Like), Multinomial ->
//                                 bernoulli, uniform(_like), normal(_like),
//                                 multinomial of the softmax (kiln's
//                                 generator: seed ignored)
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* scalar(ImportContext& c, double value, DType dtype) {
  return c.constant(full({}, value, dtype));
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere. Before opset
// 13 the input is seen as 2-D, [everything before axis, the rest].
Value* hardmax_along(ImportContext& c, Value* x, int64_t axis) {
  Value* zeros = c.emit("fill", {x}, {{"value", 0.0}});
  Value* index = c.emit("argmax", {x}, {{"dim", axis}, {"keepdim", true}});
  return c.emit("scatter", {zeros, index, scalar(c, 1.0, x->dtype())},
                {{"dim", axis}, {"reduce", std::string("none")}});
}

void hardmax(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t rank = rank_of(x);
  int64_t axis = wrap(attr_int(node, "axis", c.opset() >= 13 ? -1 : 1), rank);
  KILN_CHECK_INDEX(axis >= 0 && axis < rank, "onnx import: Hardmax with axis ",
                   attr_int(node, "axis", 0), " for an input of shape ", x->shape());
  if (c.opset() >= 13 || axis == rank - 1) return define(node, c, hardmax_along(c, x, axis));
  Dim outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= x->shape()[size_t(i)];
  Value* flat = c.emit("reshape", {x}, {{"shape", DimList{outer, inner}}});
  Value* result = hardmax_along(c, flat, 1);
  define(node, c, c.emit("reshape", {result}, {{"shape", x->shape()}}));
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between. For
// integers the bounds truncate toward 0, which keeps each comparison
// (x > 1.5 is x > 1 for integers).
void shrink(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  DType dtype = x->dtype();
  double lambd = attr_float(node, "lambd", 0.5f), bias = attr_float(node, "bias", 0.f);
  Value* bias_value = scalar(c, bias, dtype);
  Value* below = c.emit("lt", {x, scalar(c, -lambd, dtype)});
  Value* above = c.emit("gt", {x, scalar(c, lambd, dtype)});
  Value* upper = c.emit("where", {above, c.emit("sub", {x, bias_value}), scalar(c, 0.0, dtype)});
  define(node, c, c.emit("where", {below, c.emit("add", {x, bias_value}), upper}));
}

// ThresholdedRelu: x above alpha, 0 elsewhere.
void thresholded_relu(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  double alpha = attr_float(node, "alpha", 1.f);
  Value* above = c.emit("gt", {x, scalar(c, alpha, x->dtype())});
  define(node, c, c.emit("where", {above, x, scalar(c, 0.0, x->dtype())}));
}

// Softsign: x / (1 + |x|).
void softsign(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* denominator = c.emit("add", {c.emit("abs", {x}), scalar(c, 1.0, x->dtype())});
  define(node, c, c.emit("div", {x, denominator}));
}

// Celu: x above 0, alpha * (exp(x / alpha) - 1) elsewhere.
void celu(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* alpha = scalar(c, attr_float(node, "alpha", 1.f), x->dtype());
  Value* negative = c.emit("mul", {alpha, c.emit("expm1", {c.emit("div", {x, alpha})})});
  Value* positive = c.emit("gt", {x, scalar(c, 0.0, x->dtype())});
  define(node, c, c.emit("where", {positive, x, negative}));
}

// HardSwish: x * clamp(x / 6 + 1/2, 0, 1).
void hard_swish(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* scaled = c.emit("mul", {x, scalar(c, 1.0 / 6.0, x->dtype())});
  Value* shifted = c.emit("add", {scaled, scalar(c, 0.5, x->dtype())});
  Value* gate = c.emit("clamp", {shifted}, {{"min", 0.0}, {"max", 1.0}});
  define(node, c, c.emit("mul", {x, gate}));
}

// Mish: x * tanh(softplus(x)).
void mish(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* softplus = c.emit("softplus", {x}, {{"beta", 1.0}, {"threshold", 20.0}});
  define(node, c, c.emit("mul", {x, c.emit("tanh", {softplus})}));
}

void gelu(const Node& node, ImportContext& c) {
  std::string approximate = attr_string(node, "approximate", "none");
  KILN_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                   "onnx import: Gelu with approximate '", approximate, "' (none or tanh)");
  define(node, c, c.emit("gelu", {c.input(node, 0)}, {{"approximate", approximate}}));
}

// MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9) over the
// axes, the epsilon of ONNX's function body. The variance is kiln's var
// (no correction) rather than E[x^2] - E[x]^2, which can go negative.
void mean_variance_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  IntList axes = attr_ints(node, "axes", {0, 2, 3});
  Value* mean = c.emit("mean", {x}, {{"dims", axes}, {"keepdim", true}});
  Value* var = c.emit("var", {x}, {{"dims", axes}, {"correction", int64_t(0)}, {"keepdim", true}});
  Value* std = c.emit("add", {c.emit("sqrt", {var}), scalar(c, 1e-9, x->dtype())});
  define(node, c, c.emit("div", {c.emit("sub", {x, mean}), std}));
}

// LRN over channels: x / (bias + alpha / size * sum of x^2 over channels
// c - (size - 1) / 2 to c + ceil((size - 1) / 2))^beta. The window sum is
// an average pool of the squares seen as [N, 1, C, rest], padded with
// zeros on the channel axis (unevenly for an even size).
void lrn(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  KILN_CHECK_VALUE(has_attr(node, "size"), "onnx import: LRN without its size attribute");
  int64_t size = attr_int(node, "size", 1);
  KILN_CHECK_VALUE(size >= 1, "onnx import: LRN with size ", size);
  const DimList& shape = x->shape();
  KILN_CHECK_VALUE(shape.size() >= 2, "onnx import: LRN of an input of shape ", shape,
                   " (expected [N, C, ...])");
  DType dtype = x->dtype();
  Dim rest = 1;
  for (size_t i = 2; i < shape.size(); ++i)
    rest = rest * shape[i];
  Value* squares = c.emit("mul", {x, x});
  squares = c.emit("reshape", {squares}, {{"shape", DimList{shape[0], 1, shape[1], rest}}});
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  squares = c.emit("pad", {squares},
                   {{"pad", IntList{0, 0, before, after}}, {"mode", std::string("constant")}});
  Value* average = c.emit("avg_pool2d", {squares},
                          {{"kernel_size", IntList{size, 1}},
                           {"stride", IntList{1, 1}},
                           {"padding", IntList{0, 0}},
                           {"ceil_mode", false},
                           {"count_include_pad", true}});
  average = c.emit("reshape", {average}, {{"shape", shape}});
  Value* scaled = c.emit("mul", {average, scalar(c, attr_float(node, "alpha", 1e-4f), dtype)});
  Value* base = c.emit("add", {scaled, scalar(c, attr_float(node, "bias", 1.f), dtype)});
  Value* denominator = c.emit("pow", {base, scalar(c, attr_float(node, "beta", 0.75f), dtype)});
  define(node, c, c.emit("div", {x, denominator}));
}

// A per-channel vector [C] viewed as [C, 1, ...] against an [N, C, ...] input.
Value* per_channel(ImportContext& c, Value* vector, int64_t rank) {
  DimList shape(size_t(rank - 1), Dim(1));
  shape[0] = vector->shape().at(0);
  return c.emit("reshape", {vector}, {{"shape", shape}});
}

// InstanceNormalization: each (sample, channel) normalized over its spatial
// axes, then scaled and shifted per channel.
void instance_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t rank = rank_of(x);
  KILN_CHECK_VALUE(rank >= 3, "onnx import: InstanceNormalization of an input of shape ",
                   x->shape(), " (expected [N, C, d1, ...])");
  DimList spatial(x->shape().begin() + 2, x->shape().end());
  double eps = attr_float(node, "epsilon", 1e-5f);
  std::vector<Value*> normalized = c.emit_multi("layer_norm", {x, nullptr, nullptr},
                                                {{"normalized_shape", spatial}, {"eps", eps}});
  Value* scaled = c.emit("mul", {normalized[0], per_channel(c, c.input(node, 1), rank)});
  define(node, c, c.emit("add", {scaled, per_channel(c, c.input(node, 2), rank)}));
}

// GroupNormalization: x as [N, G, rest], each group normalized over its
// rest (a layer norm), then scaled and shifted per channel. Opset 18 gives
// a scale and bias per group, opset 21 one per channel.
void group_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const DimList& shape = x->shape();
  KILN_CHECK_VALUE(shape.size() >= 2, "onnx import: GroupNormalization of an input of shape ",
                   shape, " (expected [N, C, ...])");
  KILN_CHECK_VALUE(has_attr(node, "num_groups"),
                   "onnx import: GroupNormalization without its num_groups attribute");
  const int64_t groups = attr_int(node, "num_groups", 1);
  const int64_t channels = concrete_size(node, 0, x, 1, "GroupNormalization's groups");
  KILN_CHECK_VALUE(groups >= 1 && channels % groups == 0, "onnx import: GroupNormalization of ",
                   channels, " channels in ", groups, " groups (groups must divide them)");
  Value* grouped = c.emit("reshape", {x}, {{"shape", DimList{shape[0], groups, Dim(-1)}}});
  std::vector<Value*> normalized =
      c.emit_multi("layer_norm", {grouped, nullptr, nullptr},
                   {{"normalized_shape", DimList{grouped->shape()[2]}},
                    {"eps", double(attr_float(node, "epsilon", 1e-5f))}});
  Value* y = c.emit("reshape", {normalized[0]}, {{"shape", shape}});
  const int64_t rank = rank_of(x);
  auto per_channel_of = [&](Value* param) {
    if (c.opset() >= 21) return per_channel(c, param, rank);
    // One value per group, repeated over its channels.
    Value* column = c.emit("reshape", {param}, {{"shape", DimList{groups, 1}}});
    Value* repeated = c.emit("expand", {column}, {{"size", DimList{groups, channels / groups}}});
    return per_channel(c, c.emit("reshape", {repeated}, {{"shape", DimList{channels}}}), rank);
  };
  Value* scaled = c.emit("mul", {y, per_channel_of(c.input(node, 1))});
  define(node, c, c.emit("add", {scaled, per_channel_of(c.input(node, 2))}));
}

// LpNormalization: x over its L1 or L2 norm along the axis; a zero norm
// gives 0 (as ONNX Runtime does), not NaN.
void lp_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t p = attr_int(node, "p", 2);
  KILN_CHECK_VALUE(p == 1 || p == 2, "onnx import: LpNormalization with p ", p, " (1 or 2)");
  int64_t axis = attr_int(node, "axis", -1);
  Value* magnitude = p == 1 ? c.emit("abs", {x}) : c.emit("mul", {x, x});
  Value* norm = c.emit("sum", {magnitude}, {{"dims", IntList{axis}}, {"keepdim", true}});
  if (p == 2) norm = c.emit("sqrt", {norm});
  Value* zero = c.emit("eq", {norm, scalar(c, 0.0, x->dtype())});
  Value* safe_norm = c.emit("where", {zero, scalar(c, 1.0, x->dtype()), norm});
  define(node, c, c.emit("div", {x, safe_norm}));
}

// ---- generators ----

void cast_like(const Node& node, ImportContext& c) {
  define(node, c, c.emit("cast", {c.input(node, 0)}, {{"dtype", c.input(node, 1)->dtype()}}));
}

// The dtype an ONNX `dtype`-like attribute names, or `fallback` without it.
DType dtype_attr(const Node& node, const std::string& name, DType fallback) {
  if (!has_attr(node, name)) return fallback;
  return dtype_from_onnx(attr_int(node, name, 1), node.op_type() + "'s " + name);
}

// EyeLike: ones where column - row == k. The row and column of every
// element are cumulative sums of ones shaped like the input, so sizes may
// be symbolic; a constant input folds to a constant at import.
void eye_like(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  KILN_CHECK_VALUE(rank_of(x) == 2, "onnx import: EyeLike of an input of shape ", x->shape(),
                   " (expected 2-D)");
  DType dtype = dtype_attr(node, "dtype", x->dtype());
  Value* ones = c.emit("cast", {c.emit("fill", {x}, {{"value", 1.0}})}, {{"dtype", DType::Int64}});
  Value* row = c.emit("cumsum", {ones}, {{"dim", int64_t(0)}});
  Value* column = c.emit("cumsum", {ones}, {{"dim", int64_t(1)}});
  Value* k = c.constant(full({}, attr_int(node, "k", 0), DType::Int64));
  Value* on_diagonal = c.emit("eq", {c.emit("sub", {column, row}), k});
  define(node, c, c.emit("cast", {on_diagonal}, {{"dtype", dtype}}));
}

// The window functions: sum of a_j cos(2 pi j n / N) for n in [0, size),
// N = size when periodic, size - 1 when symmetric (ONNX's definition).
void window(const Node& node, ImportContext& c, const std::vector<double>& coefficients) {
  int64_t size = c.constant_ints(c.input(node, 0), node.op_type() + "'s size").at(0);
  KILN_CHECK_VALUE(size >= 0, "onnx import: ", node.op_type(), " of size ", size);
  double period = double(attr_int(node, "periodic", 1) != 0 ? size : size - 1);
  Tensor values = empty({size}, DType::Float64);
  for (int64_t n = 0; n < size; ++n) {
    double value = 0.0;
    for (size_t j = 0; j < coefficients.size(); ++j)
      value += coefficients[j] * std::cos(2.0 * M_PI * double(j) * double(n) / period);
    values.data<double>()[n] = value;
  }
  DType dtype = dtype_attr(node, "output_datatype", DType::Float32);
  define(node, c, c.emit("cast", {c.constant(values)}, {{"dtype", dtype}}));
}

void hann_window(const Node& node, ImportContext& c) {
  window(node, c, {0.5, -0.5});
}
void hamming_window(const Node& node, ImportContext& c) {
  window(node, c, {25.0 / 46.0, -21.0 / 46.0});
}
void blackman_window(const Node& node, ImportContext& c) {
  window(node, c, {0.42, -0.5, 0.08});
}

// A random op always becomes a node: emit() would draw it once at import
// when its input is a constant, and every call would then see one sample.
Value* random_node(ImportContext& c, const std::string& name, Value* like, const Attrs& attrs) {
  c.require_tensor(like, "kiln's " + name + " reads its shape from a tensor");
  return c.graph().append(op(name), {like}, attrs)->outputs().at(0);
}

void bernoulli(const Node& node, ImportContext& c) {
  Value* p = c.input(node, 0);
  Value* sample = random_node(c, "bernoulli", p, {});
  DType dtype = dtype_attr(node, "dtype", p->dtype());
  if (sample->dtype() != dtype) sample = c.emit("cast", {sample}, {{"dtype", dtype}});
  define(node, c, sample);
}

void random_uniform_like(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  define(node, c,
         random_node(c, "uniform_like", x,
                     {{"low", double(attr_float(node, "low", 0.f))},
                      {"high", double(attr_float(node, "high", 1.f))},
                      {"dtype", dtype_attr(node, "dtype", x->dtype())}}));
}

void random_normal_like(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  define(node, c,
         random_node(c, "normal_like", x,
                     {{"mean", double(attr_float(node, "mean", 0.f))},
                      {"std", double(attr_float(node, "scale", 1.f))},
                      {"dtype", dtype_attr(node, "dtype", x->dtype())}}));
}

// RandomUniform and RandomNormal: draws of a shape the attribute gives.
// The seed is not read: kiln draws from its own generator (kiln.manual_seed),
// as ONNX Runtime draws from its own.
Value* random_of_shape(const Node& node, ImportContext& c, const std::string& name,
                       const Attrs& attrs) {
  KILN_CHECK_VALUE(has_attr(node, "shape"), "onnx import: ", node.op_type(), " node '", node.name(),
                   "' without its shape attribute");
  Attrs all = attrs;
  all.set("shape", attr_ints(node, "shape", {}));
  all.set("dtype", dtype_attr(node, "dtype", DType::Float32));
  return c.graph().append(op(name), {}, all)->outputs().at(0);
}

void random_uniform(const Node& node, ImportContext& c) {
  define(node, c,
         random_of_shape(node, c, "uniform",
                         {{"low", double(attr_float(node, "low", 0.f))},
                          {"high", double(attr_float(node, "high", 1.f))}}));
}

void random_normal(const Node& node, ImportContext& c) {
  define(node, c,
         random_of_shape(node, c, "normal",
                         {{"mean", double(attr_float(node, "mean", 0.f))},
                          {"std", double(attr_float(node, "scale", 1.f))}}));
}

// Multinomial: sample_size draws with replacement per row of unnormalized
// log-probabilities: softmax gives the probabilities without overflowing.
void multinomial(const Node& node, ImportContext& c) {
  Value* logits = c.input(node, 0);
  KILN_CHECK_VALUE(rank_of(logits) == 2, "onnx import: Multinomial of an input of shape ",
                   logits->shape(), " (expected [batch, classes])");
  Value* probabilities = c.emit("softmax", {logits}, {{"dim", int64_t(1)}});
  Value* drawn =
      random_node(c, "multinomial", probabilities,
                  {{"num_samples", attr_int(node, "sample_size", 1)}, {"replacement", true}});
  define(node, c, c.emit("cast", {drawn}, {{"dtype", dtype_attr(node, "dtype", DType::Int32)}}));
}

}  // namespace

void add_activation_importers(Table& table) {
  table["Hardmax"] = hardmax;
  table["Shrink"] = shrink;
  table["ThresholdedRelu"] = thresholded_relu;
  table["Softsign"] = softsign;
  table["Celu"] = celu;
  table["HardSwish"] = hard_swish;
  table["Mish"] = mish;
  table["Gelu"] = gelu;
  table["MeanVarianceNormalization"] = mean_variance_normalization;
  table["LRN"] = lrn;
  table["InstanceNormalization"] = instance_normalization;
  table["GroupNormalization"] = group_normalization;
  table["LpNormalization"] = lp_normalization;
  table["CastLike"] = cast_like;
  table["EyeLike"] = eye_like;
  table["HannWindow"] = hann_window;
  table["HammingWindow"] = hamming_window;
  table["BlackmanWindow"] = blackman_window;
  table["Bernoulli"] = bernoulli;
  table["RandomUniformLike"] = random_uniform_like;
  table["RandomNormalLike"] = random_normal_like;
  table["RandomUniform"] = random_uniform;
  table["RandomNormal"] = random_normal;
  table["Multinomial"] = multinomial;
}

}  // namespace kiln::onnx
