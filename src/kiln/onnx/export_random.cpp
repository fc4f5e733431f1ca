// ONNX translations of the random ops. The runtime draws from its own
// generator: the same distribution as kiln's, not the same numbers.
//
//   uniform, normal (+ _like)  -> RandomUniform / RandomNormal (*Like)
//   bernoulli(p)               -> RandomUniformLike(p) < p, cast
//   multinomial(w, n)          -> Multinomial over log(w) (with replacement,
//                                 or a single draw per row)
//   randint(low, high)         -> floor(RandomUniform(low, high)), at most
//                                 high - 1, cast (ONNX draws no integers)
//   randperm(n)                -> the order that sorts n uniform draws
//                                 (TopK's indices): a uniform permutation
#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

// uniform and normal: RandomUniform and RandomNormal for a static shape;
// over symbolic sizes, ConstantOfShape makes a tensor of the shape and the
// *Like op draws one like it. uniform_like and normal_like are the *Like ops.
// The runtime draws from its own generator: the same distribution as
// kiln's, not the same numbers. A normal of std 0 is its mean, written as a
// uniform draw over [mean, mean]: ONNX Runtime's RandomNormal aborts the
// process on a scale of 0.
void random_draw(const Node& node, ExportContext& c) {
  const std::string& name = node.op().name;
  const Attrs& a = node.attrs();
  bool normal = (name == "normal" || name == "normal_like") && a.get_float("std") != 0;
  bool like = name == "uniform_like" || name == "normal_like";
  const DimList& shape = node.output()->shape();
  std::string type = normal ? "RandomNormal" : "RandomUniform";
  std::vector<std::string> inputs;
  if (like) {
    inputs.push_back(c.name(node.input(0)));
  } else if (!is_static(shape)) {
    inputs.push_back(c.temp("ConstantOfShape", {c.sizes(shape)}));
  }
  auto& made = c.node_for(node.output(), inputs.empty() ? type : type + "Like", inputs);
  set_attr(made, "dtype", int64_t(onnx_dtype(node.output()->dtype())));
  if (normal) {
    set_attr(made, "mean", float(a.get_float("mean")));
    set_attr(made, "scale", float(a.get_float("std")));
  } else {
    bool uniform = a.has("low");
    set_attr(made, "low", float(a.get_float(uniform ? "low" : "mean")));
    set_attr(made, "high", float(a.get_float(uniform ? "high" : "mean")));
  }
  if (inputs.empty()) set_attr(made, "shape", to_static(shape));
}

// A draw u in [0, 1) is below p with probability p: never for 0, always
// for 1. (ONNX Runtime 1.30's Bernoulli gives the opposite: 1 where p is 0.)
void bernoulli(const Node& node, ExportContext& c) {
  std::string p = c.name(node.input(0));
  std::string hit = c.temp("Less", {c.temp("RandomUniformLike", {p}), p});
  auto& made = c.node_for(node.output(), "Cast", {hit});
  set_attr(made, "to", int64_t(onnx_dtype(node.output()->dtype())));
}

// ONNX's Multinomial draws with replacement from rows of unnormalized
// log-probabilities ([batch, classes], float).
void multinomial(const Node& node, ExportContext& c) {
  int64_t samples = node.attrs().get_int("num_samples");
  KILN_CHECK(node.attrs().get_bool("replacement") || samples == 1,
             "onnx export: multinomial without replacement of ", samples,
             " samples (ONNX's Multinomial draws with replacement)");
  bool one_row = node.input(0)->shape().size() == 1;
  std::string weights = c.as_dtype(node.input(0), DType::Float32);
  if (one_row) weights = c.temp("Unsqueeze", {weights, c.ints({0})});
  pb::NodeProto* made = nullptr;
  std::string drawn = c.temp("Multinomial", {c.temp("Log", {weights})}, &made);
  set_attr(*made, "sample_size", samples);
  set_attr(*made, "dtype", int64_t(onnx_dtype(DType::Int64)));
  if (one_row) {
    c.node_for(node.output(), "Squeeze", {drawn, c.ints({0})});
    return;
  }
  c.node_for(node.output(), "Identity", {drawn});
}

// A double holds every integer up to 2^53 exactly; the upper bound guards
// against a draw rounded up to `high`.
void randint(const Node& node, ExportContext& c) {
  int64_t low = node.attrs().get_int("low"), high = node.attrs().get_int("high");
  pb::NodeProto* made = nullptr;
  std::string drawn = c.temp("RandomUniform", {}, &made);
  set_attr(*made, "dtype", int64_t(onnx_dtype(DType::Float64)));
  set_attr(*made, "low", float(low));
  set_attr(*made, "high", float(high));
  set_attr(*made, "shape", static_shape(node, node.output()));
  std::string floored = c.temp("Floor", {drawn});
  std::string bounded = c.temp("Min", {floored, c.scalar(double(high - 1), DType::Float64)});
  auto& cast = c.node_for(node.output(), "Cast", {bounded});
  set_attr(cast, "to", int64_t(onnx_dtype(node.output()->dtype())));
}

void randperm(const Node& node, ExportContext& c) {
  int64_t n = node.attrs().get_int("n");
  pb::NodeProto* made = nullptr;
  std::string keys = c.temp("RandomUniform", {}, &made);
  set_attr(*made, "shape", std::vector<int64_t>{n});
  std::string values = c.fresh("t"), order = c.fresh("t");
  auto& topk = c.node("TopK", {keys, c.ints({n})}, {values, order});
  set_attr(topk, "axis", int64_t(0));
  auto& cast = c.node_for(node.output(), "Cast", {order});
  set_attr(cast, "to", int64_t(onnx_dtype(node.output()->dtype())));
}

}  // namespace

void add_random_exporters(Table& table) {
  for (const char* name : {"uniform", "normal", "uniform_like", "normal_like"})
    table[name] = random_draw;
  table["bernoulli"] = bernoulli;
  table["multinomial"] = multinomial;
  table["randint"] = randint;
  table["randperm"] = randperm;
}

}  // namespace kiln::onnx
