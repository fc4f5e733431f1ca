// Translations of ONNX's normalization, softmax and dropout ops and a few
// activations (convolution and pooling: import_conv_pool.cpp).
#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Table = std::unordered_map<std::string, ImportFn>;
using Node = pb::NodeProto;

void define(const Node& node, ImportContext& c, Value* value) {
  c.define(node.output(0), value);
}

Value* constant_like(ImportContext& c, double value, DType dtype) {
  return c.constant(full({}, value, dtype));
}

// Training mode (opset 14's training_mode; before, asking for more than Y)
// normalizes with the batch's statistics per channel (the mean and the
// biased variance) and gives the running statistics updated with them as
// running * momentum + batch * (1 - momentum): ONNX's momentum is what
// PyTorch calls 1 - momentum.
void batch_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  double eps = attr_float(node, "epsilon", 1e-5f);
  bool training = c.opset() >= 14 ? attr_int(node, "training_mode", 0) != 0
                                  : node.output_size() > 1 && !node.output(1).empty();
  Value *mean = c.input(node, 3), *var = c.input(node, 4);
  if (training) {
    KILN_CHECK(node.output_size() <= 3, "onnx import: BatchNormalization's saved_mean and ",
               "saved_var outputs (training before opset 14)");
    IntList dims;
    for (int64_t d = 0; d < int64_t(x->shape().size()); ++d)
      if (d != 1) dims.push_back(d);
    mean = c.emit("mean", {x}, {{"dims", dims}, {"keepdim", false}});
    var = c.emit("var", {x}, {{"dims", dims}, {"correction", int64_t(0)}, {"keepdim", false}});
  }
  std::vector<Value*> outputs =
      c.emit_multi("batch_norm", {x, c.input(node, 1), c.input(node, 2), mean, var},
                   {{"training", false}, {"eps", eps}});
  define(node, c, outputs[0]);
  if (!training) return;
  double momentum = attr_float(node, "momentum", 0.9f);
  for (int i = 1; i < std::min(node.output_size(), 3); ++i) {
    if (node.output(i).empty()) continue;
    Value* running = c.input(node, 2 + i);
    Value* batch = i == 1 ? mean : var;
    Value* kept = c.emit("mul", {running, constant_like(c, momentum, running->dtype())});
    Value* added = c.emit("mul", {batch, constant_like(c, 1.0 - momentum, batch->dtype())});
    c.define(node.output(i), c.emit("add", {kept, added}));
  }
}

// The optional Mean and InvStdDev outputs keep the normalized dimensions
// as 1s: mean(x) and 1 / sqrt(var(x) + epsilon) over them.
void layer_normalization(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t rank = int64_t(x->shape().size());
  int64_t axis = attr_int(node, "axis", -1);
  if (axis < 0) axis += rank;
  DimList normalized(x->shape().begin() + axis, x->shape().end());
  double eps = attr_float(node, "epsilon", 1e-5f);
  std::vector<Value*> outputs = c.emit_multi("layer_norm", {x, c.input(node, 1), c.input(node, 2)},
                                             {{"normalized_shape", normalized}, {"eps", eps}});
  define(node, c, outputs[0]);
  if (node.output_size() < 2) return;
  IntList dims;
  for (int64_t d = axis; d < rank; ++d)
    dims.push_back(d);
  Value* mean = c.emit("mean", {x}, {{"dims", dims}, {"keepdim", true}});
  c.define(node.output(1), mean);
  if (node.output_size() < 3) return;
  Value* var = c.emit("var", {x}, {{"dims", dims}, {"correction", int64_t(0)}, {"keepdim", true}});
  Value* shifted = c.emit("add", {var, c.constant(full({}, eps, x->dtype()))});
  c.define(node.output(2), c.emit("rsqrt", {shifted}));
}

// Softmax over one axis from opset 13; before, over everything from the
// axis on (the input seen as 2-D).
void softmax(const Node& node, ImportContext& c, const char* op) {
  Value* x = c.input(node, 0);
  int64_t rank = int64_t(x->shape().size());
  int64_t axis = attr_int(node, "axis", c.opset() >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (c.opset() >= 13 || axis == rank - 1) {
    define(node, c, c.emit(op, {x}, {{"dim", axis}}));
    return;
  }
  Dim outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= x->shape()[size_t(i)];
  Value* flat = c.emit("reshape", {x}, {{"shape", DimList{outer, inner}}});
  Value* result = c.emit(op, {flat}, {{"dim", int64_t(1)}});
  define(node, c, c.emit("reshape", {result}, {{"shape", x->shape()}}));
}

void softmax_op(const Node& node, ImportContext& c) {
  softmax(node, c, "softmax");
}
void log_softmax(const Node& node, ImportContext& c) {
  softmax(node, c, "log_softmax");
}

// prelu(x, slope) = x where x >= 0, slope * x elsewhere (slope broadcasts).
// A slope of one value per channel ([C] for an [N, C, ...] input) applies
// per channel, as the first versions of PRelu defined.
void prelu(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* slope = c.input(node, 1);
  const DimList& shape = x->shape();
  bool per_channel = slope->shape().size() == 1 && shape.size() > 2 &&
                     slope->shape()[0] == shape[1] && slope->shape()[0] != shape.back();
  if (per_channel) {
    DimList channel_shape(shape.size() - 1, 1);
    channel_shape[0] = shape[1];
    slope = c.emit("reshape", {slope}, {{"shape", channel_shape}});
  }
  Value* negative = c.emit("lt", {x, c.constant(full({}, 0.0, x->dtype()))});
  Value* scaled = c.emit("mul", {x, slope});
  define(node, c, c.emit("where", {negative, scaled, x}));
}

// hard_sigmoid(x) = clamp(alpha * x + beta, 0, 1).
void hard_sigmoid(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* scaled =
      c.emit("mul", {x, c.constant(full({}, double(attr_float(node, "alpha", 0.2f)), x->dtype()))});
  Value* shifted = c.emit(
      "add", {scaled, c.constant(full({}, double(attr_float(node, "beta", 0.5f)), x->dtype()))});
  define(node, c, c.emit("clamp", {shifted}, {{"min", 0.0}, {"max", 1.0}}));
}

// selu(x) = gamma * elu(x, alpha).
void selu(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* elu = c.emit("elu", {x},
                      {{"alpha", double(attr_float(node, "alpha", 1.67326319217681884765625f))}});
  double gamma = attr_float(node, "gamma", 1.05070102214813232421875f);
  define(node, c, c.emit("mul", {elu, c.constant(full({}, gamma, x->dtype()))}));
}

// Inference: dropout passes its input through, and its mask keeps
// everything (all true).
void dropout_inference(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  define(node, c, x);
  if (node.output_size() < 2 || node.output(1).empty()) return;
  if (is_static(x->shape()))
    return c.define(node.output(1), c.constant(full(to_static(x->shape()), true, DType::Bool)));
  Value* keep = c.constant(full({}, true, DType::Bool));
  c.define(node.output(1), c.emit("expand", {keep}, {{"size", x->shape()}}));
}

// Training (opset 12's training_mode input, which may be known only at run
// time): each element is kept where a uniform draw in [0, 1) is at least
// the ratio (so a ratio of 0 keeps all, exactly), and scaled by
// 1 / (1 - ratio). With training_mode false at run time the mask keeps all
// and the scale is 1.
void dropout(const Node& node, ImportContext& c) {
  Value* training = c.opset() >= 12 ? c.input(node, 2) : nullptr;
  if (!training || (c.is_constant(training) &&
                    !c.constant_data(training, "Dropout's training_mode").item<bool>())) {
    return dropout_inference(node, c);
  }
  Value* x = c.input(node, 0);
  const DType dtype = x->dtype();
  Value* ratio = c.input(node, 1);
  if (!ratio) ratio = constant_like(c, 0.5, dtype);
  ratio = c.emit("cast", {ratio}, {{"dtype", dtype}});
  Value* draw = c.emit("uniform_like", {x});
  Value* keep = c.emit("ge", {draw, ratio});
  Value* scale = c.emit("reciprocal", {c.emit("sub", {constant_like(c, 1.0, dtype), ratio})});
  if (!c.is_constant(training)) {
    keep = c.emit("where", {training, keep, c.constant(full({}, true, DType::Bool))});
    scale = c.emit("where", {training, scale, constant_like(c, 1.0, dtype)});
  }
  Value* scaled = c.emit("mul", {x, scale});
  define(node, c, c.emit("where", {keep, scaled, constant_like(c, 0.0, dtype)}));
  if (node.output_size() > 1 && !node.output(1).empty()) c.define(node.output(1), keep);
}

}  // namespace

void add_nn_importers(Table& table) {
  table["BatchNormalization"] = batch_normalization;
  table["LayerNormalization"] = layer_normalization;
  table["Softmax"] = softmax_op;
  table["LogSoftmax"] = log_softmax;
  table["Dropout"] = dropout;
  table["PRelu"] = prelu;
  table["Selu"] = selu;
  table["HardSigmoid"] = hard_sigmoid;
}

}  // namespace kiln::onnx
