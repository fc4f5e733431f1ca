// Translations of ONNX's convolution (and its transpose), pooling,
// normalization, softmax and dropout ops (two spatial dimensions, symmetric
// padding: what kiln's ops compute).
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

// The [h, w] padding of a 2-D window op over `x`; ONNX's pads are
// [h0, w0, h1, w1] and auto_pad may ask for "same" padding, which with
// stride 1 pads (kernel - 1) * dilation whatever the size.
IntList padding_of(const Node& node, const IntList& kernel, const IntList& stride,
                   const IntList& dilation, const Value* x) {
  std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  if (auto_pad == "VALID") return {0, 0};
  IntList pads = attr_ints(node, "pads", {0, 0, 0, 0});
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < 2; ++i) {
      int64_t total = (kernel[i] - 1) * dilation[i];
      if (stride[i] != 1) {
        int64_t axis = int64_t(x->shape().size() - 2 + i);
        int64_t size = concrete_size(
            node, 0, x, axis,
            str(node.op_type(), " with auto_pad ", auto_pad, " and stride ", stride[i]));
        int64_t out = (size + stride[i] - 1) / stride[i];
        total =
            std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - size);
      }
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + 2] = total - pads[i];
    }
  }
  KILN_CHECK(pads.size() == 4 && pads[0] == pads[2] && pads[1] == pads[3],
             "onnx import: ", node.op_type(), " with pads ", pads, " (kiln pads both sides alike)");
  return {pads[0], pads[1]};
}

void check_2d(const Node& node, const Value* x) {
  KILN_CHECK(x->shape().size() == 4, "onnx import: ", node.op_type(), " over a ", x->shape().size(),
             "-D input (kiln has the 1-D and 2-D forms)");
}

// The 1-D forms ([N, C, L]) run as 2-D ones over [N, C, 1, L]: every window
// attribute gets a leading 1 (a 0 for padding) and the result loses the
// height again.
bool is_1d(const Value* x) {
  return x->shape().size() == 3;
}

Value* as_2d(ImportContext& c, Value* x) {
  DimList shape = x->shape();
  shape.insert(shape.end() - 1, 1);
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// ONNX pads of a 1-D op ([begin, end]) as a 2-D op's [0, begin, 0, end].
pb::NodeProto widened_node(const Node& node) {
  pb::NodeProto copy = node;
  for (pb::AttributeProto& attr : *copy.mutable_attribute()) {
    if (attr.ints_size() == 0) continue;
    std::vector<int64_t> values(attr.ints().begin(), attr.ints().end());
    attr.clear_ints();
    if (attr.name() == "pads" && values.size() == 2) values = {0, values[0], 0, values[1]};
    if (attr.name() != "pads" && values.size() == 1) values.insert(values.begin(), 1);
    for (int64_t value : values)
      attr.add_ints(value);
  }
  return copy;
}

Value* back_to_1d(ImportContext& c, Value* y) {
  DimList shape = y->shape();
  shape.erase(shape.end() - 2);
  return c.emit("reshape", {y}, {{"shape", shape}});
}

// A window op's node and input, widened to the 2-D form when 1-D.
struct Windowed {
  pb::NodeProto node;
  Value* x;
  bool one_d;

  // The op's result under the node's ONNX name, narrowed back when 1-D.
  void define_result(ImportContext& c, Value* y) const {
    c.define(node.output(0), one_d ? back_to_1d(c, y) : y);
  }
};

Windowed windowed(const Node& raw, ImportContext& c) {
  Value* x = c.input(raw, 0);
  bool one_d = is_1d(x);
  Windowed w{one_d ? widened_node(raw) : raw, one_d ? as_2d(c, x) : x, one_d};
  check_2d(w.node, w.x);
  return w;
}

void conv(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const pb::NodeProto& node = w.node;
  Value* x = w.x;
  Value* weight = w.one_d ? as_2d(c, c.input(raw, 1)) : c.input(raw, 1);
  IntList weight_shape = to_static(weight->shape(), "onnx import");
  IntList kernel = {weight_shape[2], weight_shape[3]};
  IntList stride = attr_ints(node, "strides", {1, 1});
  IntList dilation = attr_ints(node, "dilations", {1, 1});
  IntList padding = padding_of(node, kernel, stride, dilation, x);
  std::vector<Value*> inputs = {x, weight};
  if (Value* bias = c.input(node, 2)) inputs.push_back(bias);
  Value* y = c.emit("conv2d", inputs,
                    {{"stride", stride},
                     {"padding", padding},
                     {"dilation", dilation},
                     {"groups", attr_int(node, "group", 1)}});
  w.define_result(c, y);
}

// ConvTranspose's [h0, w0, h1, w1] pads: given, or derived from
// output_shape (or, with auto_pad SAME_*, input * stride) as ONNX's spec
// says: the total padding that size leaves, split between the two ends.
IntList conv_transpose_pads(const Node& node, const Value* x, const IntList& weight_shape) {
  std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (!same && !has_attr(node, "output_shape")) return attr_ints(node, "pads", {0, 0, 0, 0});
  IntList stride = attr_ints(node, "strides", {1, 1}),
          dilation = attr_ints(node, "dilations", {1, 1});
  IntList output_padding = attr_ints(node, "output_padding", {0, 0});
  IntList wanted = attr_ints(node, "output_shape", {});
  if (wanted.size() > 2) wanted.erase(wanted.begin(), wanted.end() - 2);
  IntList pads(4, 0);
  for (size_t i = 0; i < 2; ++i) {
    int64_t in = concrete_size(node, 0, x, int64_t(2 + i), "ConvTranspose's derived padding");
    int64_t out = wanted.empty() ? in * stride[i] : wanted.at(i);
    int64_t total = stride[i] * (in - 1) + output_padding[i] +
                    (weight_shape[2 + i] - 1) * dilation[i] + 1 - out;
    bool upper = auto_pad == "SAME_UPPER";
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + 2] = total - pads[i];
  }
  return pads;
}

// Less padding at the end than at the start is more output at the end:
// kiln's output_padding (the form kiln's export writes when ONNX Runtime
// refuses an output_padding).
void conv_transpose(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  check_2d(node, x);
  Value* weight = c.input(node, 1);
  IntList pads = conv_transpose_pads(node, x, to_static(weight->shape(), "onnx import"));
  IntList output_padding = attr_ints(node, "output_padding", {0, 0});
  KILN_CHECK(
      pads.size() == 4 && pads[2] >= 0 && pads[3] >= 0 && pads[0] >= pads[2] && pads[1] >= pads[3],
      "onnx import: ConvTranspose with pads ", pads,
      " (kiln pads the end no more than the start, and not below 0)");
  for (size_t i = 0; i < 2; ++i)
    output_padding[i] += pads[i] - pads[i + 2];
  std::vector<Value*> inputs = {x, weight};
  if (Value* bias = c.input(node, 2)) inputs.push_back(bias);
  define(node, c,
         c.emit("conv_transpose2d", inputs,
                {{"stride", attr_ints(node, "strides", {1, 1})},
                 {"padding", IntList{pads[0], pads[1]}},
                 {"output_padding", output_padding},
                 {"groups", attr_int(node, "group", 1)},
                 {"dilation", attr_ints(node, "dilations", {1, 1})}}));
}

void max_pool(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const pb::NodeProto& node = w.node;
  Value* x = w.x;
  KILN_CHECK(node.output_size() == 1 || node.output(1).empty(),
             "onnx import: MaxPool's indices output");
  KILN_CHECK(attr_int(node, "storage_order", 0) == 0, "onnx import: MaxPool with storage_order=1");
  IntList kernel = attr_ints(node, "kernel_shape", {});
  IntList stride = attr_ints(node, "strides", {1, 1});
  IntList dilation = attr_ints(node, "dilations", {1, 1});
  Value* y = c.emit("max_pool2d", {x},
                    {{"kernel_size", kernel},
                     {"stride", stride},
                     {"padding", padding_of(node, kernel, stride, dilation, x)},
                     {"dilation", dilation},
                     {"ceil_mode", attr_int(node, "ceil_mode", 0) != 0}});
  w.define_result(c, y);
}

void average_pool(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const pb::NodeProto& node = w.node;
  Value* x = w.x;
  IntList kernel = attr_ints(node, "kernel_shape", {});
  IntList stride = attr_ints(node, "strides", {1, 1});
  Value* y = c.emit("avg_pool2d", {x},
                    {{"kernel_size", kernel},
                     {"stride", stride},
                     {"padding", padding_of(node, kernel, stride, {1, 1}, x)},
                     {"ceil_mode", attr_int(node, "ceil_mode", 0) != 0},
                     {"count_include_pad", attr_int(node, "count_include_pad", 0) != 0}});
  w.define_result(c, y);
}

void global_average_pool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  check_2d(node, x);
  define(node, c, c.emit("adaptive_avg_pool2d", {x}, {{"output_size", IntList{1, 1}}}));
}

void global_max_pool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  check_2d(node, x);
  define(node, c, c.emit("amax", {x}, {{"dims", IntList{2, 3}}, {"keepdim", true}}));
}

void batch_normalization(const Node& node, ImportContext& c) {
  KILN_CHECK(attr_int(node, "training_mode", 0) == 0 && node.output_size() == 1,
             "onnx import: BatchNormalization in training mode");
  std::vector<Value*> outputs = c.emit_multi(
      "batch_norm",
      {c.input(node, 0), c.input(node, 1), c.input(node, 2), c.input(node, 3), c.input(node, 4)},
      {{"training", false}, {"eps", double(attr_float(node, "epsilon", 1e-5f))}});
  define(node, c, outputs[0]);
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
void dropout(const Node& node, ImportContext& c) {
  if (jit::Value* training = c.input(node, 2)) {
    KILN_CHECK(!c.constant_data(training, "Dropout's training_mode").item<bool>(),
               "onnx import: Dropout in training mode");
  }
  Value* x = c.input(node, 0);
  define(node, c, x);
  if (node.output_size() < 2) return;
  if (is_static(x->shape()))
    return c.define(node.output(1), c.constant(full(to_static(x->shape()), true, DType::Bool)));
  Value* keep = c.constant(full({}, true, DType::Bool));
  c.define(node.output(1), c.emit("expand", {keep}, {{"size", x->shape()}}));
}

}  // namespace

void add_nn_importers(Table& table) {
  table["Conv"] = conv;
  table["ConvTranspose"] = conv_transpose;
  table["MaxPool"] = max_pool;
  table["AveragePool"] = average_pool;
  table["GlobalAveragePool"] = global_average_pool;
  table["GlobalMaxPool"] = global_max_pool;
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
