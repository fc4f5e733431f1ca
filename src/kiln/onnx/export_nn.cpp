// ONNX translations of convolution (and its transpose), pooling, and the
// normalization and dropout ops (the random ops: export_random.cpp). Ops
// with extra outputs for their backward rule (dropout's mask, batch_norm's
// and layer_norm's statistics) export when only their first output is read,
// which is the case in inference graphs.
#include <algorithm>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

// The number of spatial dims of a conv or pooling op: its 2d or 3d form.
size_t spatial_dims(const Node& node) {
  const std::string& name = node.op().name;
  return name.size() > 2 && name.compare(name.size() - 2, 2, "3d") == 0 ? 3 : 2;
}

// kiln's window attributes may hold one number for every spatial dim.
std::vector<int64_t> spatial(const IntList& values, size_t k) {
  if (values.size() == 1) return std::vector<int64_t>(k, values[0]);
  return values;
}

// Padding per spatial dim as ONNX's [begins..., ends...].
std::vector<int64_t> pads_of(const IntList& padding, size_t k) {
  std::vector<int64_t> begins = spatial(padding, k), pads = begins;
  pads.insert(pads.end(), begins.begin(), begins.end());
  return pads;
}

// kiln's conv and pooling take unbatched [C, spatial...] inputs too; ONNX's
// do not. The op runs on [1, C, ...] and the result loses the leading 1.
struct Unbatched {
  bool active;
  std::string input;
};

Unbatched batched_input(const Node& node, ExportContext& c) {
  KILN_CHECK(is_floating(node.input(0)->dtype()), "onnx export: ", node.op().name, " of ",
             node.input(0)->dtype(), " (ONNX's Conv and pooling ops take floating types)");
  std::string input = c.name(node.input(0));
  if (node.input(0)->shape().size() != spatial_dims(node) + 1) return {false, input};
  return {true, c.temp("Unsqueeze", {input, c.ints({0})})};
}

// The node computing `value` (into a temporary when unbatched), and the
// squeeze that gives the value its name afterwards.
pb::NodeProto& spatial_node(const Node& node, ExportContext& c, const Unbatched& unbatched,
                            const std::string& op_type, std::vector<std::string> inputs,
                            std::string* pending) {
  inputs.insert(inputs.begin(), unbatched.input);
  if (!unbatched.active) return c.node_for(node.output(), op_type, inputs);
  *pending = c.fresh("t");
  return c.node(op_type, inputs, {*pending});
}

void finish_spatial(const Node& node, ExportContext& c, const std::string& pending) {
  if (!pending.empty()) c.node_for(node.output(), "Squeeze", {pending, c.ints({0})});
}

void only_first_output_read(const Node& node) {
  for (size_t i = 1; i < node.outputs().size(); ++i) {
    const jit::Value* extra = node.output(i);
    KILN_CHECK(extra->uses().empty() && node.graph().output_uses(extra) == 0,
               "onnx export: ", node.op().name, "'s output ", i,
               " (kept for its backward rule) is read; only inference graphs export");
  }
}

// conv2d and conv3d.
void conv(const Node& node, ExportContext& c) {
  const size_t k = spatial_dims(node);
  Unbatched unbatched = batched_input(node, c);
  std::vector<std::string> inputs = {c.name(node.input(1))};
  if (node.inputs().size() > 2 && node.input(2)) inputs.push_back(c.name(node.input(2)));
  IntList weight = static_shape(node, node.input(1));
  std::string pending;
  auto& made = spatial_node(node, c, unbatched, "Conv", inputs, &pending);
  set_attr(made, "kernel_shape", std::vector<int64_t>(weight.begin() + 2, weight.end()));
  set_attr(made, "strides", spatial(node.attrs().get_ints("stride"), k));
  set_attr(made, "pads", pads_of(node.attrs().get_ints("padding"), k));
  set_attr(made, "dilations", spatial(node.attrs().get_ints("dilation"), k));
  set_attr(made, "group", node.attrs().get_int("groups"));
  finish_spatial(node, c, pending);
}

// kiln's weight is [C_in, C_out / groups, kh, kw], as ONNX's ConvTranspose
// reads it; the output size formula is the same too, output_padding included.
// ONNX Runtime refuses an output_padding of the stride or more (PyTorch
// allows it below the dilation): the extra rows are then written as less
// padding at the end, and past what the padding covers, as zeros padded on
// (no input reaches them) with the bias added after.
void conv_transpose(const Node& node, ExportContext& c) {
  const Attrs& a = node.attrs();
  const size_t k = spatial_dims(node);
  std::vector<int64_t> stride = spatial(a.get_ints("stride"), k);
  std::vector<int64_t> padding = spatial(a.get_ints("padding"), k);
  std::vector<int64_t> output_padding = spatial(a.get_ints("output_padding"), k);
  bool refused = false;
  for (size_t i = 0; i < k; ++i)
    refused = refused || output_padding[i] >= stride[i];
  // Pad's pads over [N, C, spatial...]: begins, then ends.
  std::vector<int64_t> pads = pads_of(padding, k), extra(2 * (k + 2), 0);
  bool padded_on = false;
  if (refused) {
    for (size_t i = 0; i < k; ++i) {
      pads[k + i] = std::max<int64_t>(padding[i] - output_padding[i], 0);
      extra[k + 4 + i] = std::max<int64_t>(output_padding[i] - padding[i], 0);
      padded_on = padded_on || extra[k + 4 + i] > 0;
      output_padding[i] = 0;
    }
  }
  bool has_bias = node.inputs().size() > 2 && node.input(2);
  Unbatched unbatched = batched_input(node, c);
  std::vector<std::string> inputs = {c.name(node.input(1))};
  if (has_bias && !padded_on) inputs.push_back(c.name(node.input(2)));
  IntList weight = static_shape(node, node.input(1));
  pb::NodeProto* made = nullptr;
  std::string y = c.temp("ConvTranspose", {unbatched.input, inputs[0]}, &made);
  if (inputs.size() > 1) made->add_input(inputs[1]);
  set_attr(*made, "kernel_shape", std::vector<int64_t>(weight.begin() + 2, weight.end()));
  set_attr(*made, "strides", stride);
  set_attr(*made, "pads", pads);
  set_attr(*made, "output_padding", output_padding);
  set_attr(*made, "dilations", spatial(a.get_ints("dilation"), k));
  set_attr(*made, "group", a.get_int("groups"));
  if (padded_on) {
    y = c.temp("Pad", {y, c.ints(extra)});
    if (has_bias) {
      std::vector<int64_t> channel_shape(k + 1, 1);
      channel_shape[0] = -1;
      std::string bias = c.temp("Reshape", {c.name(node.input(2)), c.ints(channel_shape)});
      y = c.temp("Add", {y, bias});
    }
  }
  if (unbatched.active) {
    c.node_for(node.output(), "Squeeze", {y, c.ints({0})});
    return;
  }
  c.node_for(node.output(), "Identity", {y});
}

IntList stride_or_kernel(const Node& node) {
  const IntList& stride = node.attrs().get_ints("stride");
  return stride.empty() ? node.attrs().get_ints("kernel_size") : stride;
}

void max_pool(const Node& node, ExportContext& c) {
  const size_t k = spatial_dims(node);
  Unbatched unbatched = batched_input(node, c);
  std::string pending;
  auto& made = spatial_node(node, c, unbatched, "MaxPool", {}, &pending);
  set_attr(made, "kernel_shape", spatial(node.attrs().get_ints("kernel_size"), k));
  set_attr(made, "strides", spatial(stride_or_kernel(node), k));
  set_attr(made, "pads", pads_of(node.attrs().get_ints("padding"), k));
  set_attr(made, "dilations", spatial(node.attrs().get_ints("dilation"), k));
  set_attr(made, "ceil_mode", int64_t(node.attrs().get_bool("ceil_mode")));
  finish_spatial(node, c, pending);
}

void avg_pool(const Node& node, ExportContext& c) {
  const size_t k = spatial_dims(node);
  Unbatched unbatched = batched_input(node, c);
  std::string pending;
  auto& made = spatial_node(node, c, unbatched, "AveragePool", {}, &pending);
  set_attr(made, "kernel_shape", spatial(node.attrs().get_ints("kernel_size"), k));
  set_attr(made, "strides", spatial(stride_or_kernel(node), k));
  set_attr(made, "pads", pads_of(node.attrs().get_ints("padding"), k));
  set_attr(made, "ceil_mode", int64_t(node.attrs().get_bool("ceil_mode")));
  set_attr(made, "count_include_pad", int64_t(node.attrs().get_bool("count_include_pad")));
  finish_spatial(node, c, pending);
}

bool is_one(const Dim& dim) {
  return dim.is_static() && dim.static_value() == 1;
}

// Adaptive pooling exports when its windows are all alike: a global pool,
// or an output size that divides the input's. At a symbolic input size only
// the global pool has a window ONNX can state.
void adaptive_avg_pool2d(const Node& node, ExportContext& c) {
  const DimList& in_dims = node.input(0)->shape();
  const DimList& out_dims = node.output()->shape();
  bool symbolic_window = !in_dims[in_dims.size() - 2].is_static() || !in_dims.back().is_static();
  if (symbolic_window && is_one(out_dims[out_dims.size() - 2]) && is_one(out_dims.back())) {
    Unbatched unbatched = batched_input(node, c);
    std::string pending;
    spatial_node(node, c, unbatched, "GlobalAveragePool", {}, &pending);
    finish_spatial(node, c, pending);
    return;
  }
  auto window = [&](const Dim& dim) {
    return require_static(dim, "onnx export: adaptive_avg_pool2d",
                          "spatial size (ONNX's AveragePool has a fixed window; only a pool to "
                          "1x1 exports at symbolic sizes)");
  };
  int64_t h = window(in_dims[in_dims.size() - 2]), w = window(in_dims.back());
  int64_t oh = window(out_dims[out_dims.size() - 2]), ow = window(out_dims.back());
  KILN_CHECK(h % oh == 0 && w % ow == 0, "onnx export: adaptive_avg_pool2d from ", h, "x", w,
             " to ", oh, "x", ow, " has windows of different sizes, which ONNX cannot express");
  Unbatched unbatched = batched_input(node, c);
  std::string pending;
  auto& made = spatial_node(node, c, unbatched, "AveragePool", {}, &pending);
  set_attr(made, "kernel_shape", std::vector<int64_t>{h / oh, w / ow});
  set_attr(made, "strides", std::vector<int64_t>{h / oh, w / ow});
  finish_spatial(node, c, pending);
}

void dropout(const Node& node, ExportContext& c) {
  only_first_output_read(node);
  KILN_CHECK(!node.attrs().get_bool("train") || node.attrs().get_float("p") == 0.0,
             "onnx export: dropout in training mode (call eval() before exporting)");
  c.node_for(node.output(), "Identity", {c.name(node.input(0))});
}

// An optional per-channel input, or `fill` of `channels` elements.
std::string channel_input(const Node& node, size_t index, int64_t channels, double fill,
                          ExportContext& c) {
  if (index < node.inputs().size() && node.input(index)) return c.name(node.input(index));
  return c.initializer(full({channels}, fill, node.input(0)->dtype()));
}

void batch_norm(const Node& node, ExportContext& c) {
  only_first_output_read(node);
  KILN_CHECK(!node.attrs().get_bool("training"),
             "onnx export: batch_norm in training mode (call eval() before exporting)");
  KILN_CHECK(node.input(3) && node.input(4),
             "onnx export: batch_norm in eval mode without running statistics");
  int64_t channels =
      require_static(node.input(0)->shape().at(1), "onnx export: batch_norm", "channel count");
  auto& made = c.node_for(
      node.output(), "BatchNormalization",
      {c.name(node.input(0)), channel_input(node, 1, channels, 1.0, c),
       channel_input(node, 2, channels, 0.0, c), c.name(node.input(3)), c.name(node.input(4))});
  set_attr(made, "epsilon", float(node.attrs().get_float("eps")));
}

void layer_norm(const Node& node, ExportContext& c) {
  only_first_output_read(node);
  KILN_CHECK(c.opset() >= 17,
             "onnx export: layer_norm needs opset 17 (LayerNormalization), "
             "exporting at ",
             c.opset());
  const IntList& normalized = node.attrs().get_ints("normalized_shape");
  int64_t count = 1;
  for (int64_t dim : normalized)
    count *= dim;
  std::string scale = channel_input(node, 1, count, 1.0, c);
  std::string bias = channel_input(node, 2, count, 0.0, c);
  auto reshaped = [&](const std::string& name, size_t index) {
    if (index < node.inputs().size() && node.input(index)) return name;
    return c.temp("Reshape",
                  {name, c.ints(std::vector<int64_t>(normalized.begin(), normalized.end()))});
  };
  auto& made = c.node_for(node.output(), "LayerNormalization",
                          {c.name(node.input(0)), reshaped(scale, 1), reshaped(bias, 2)});
  set_attr(made, "axis", -int64_t(normalized.size()));
  set_attr(made, "epsilon", float(node.attrs().get_float("eps")));
}

// scaled_dot_product_attention (the op fuse_attention puts in frozen traces)
// as the ops it stands for: softmax(q . k^T * scale + mask) . v. A bool mask
// (and is_causal) becomes Where(mask, scores, -inf). A query that sees no key
// (a row of -inf scores) gets zeros from kiln's op, as from torch's, but NaN
// from Softmax: with a mask, a Where on the row's max puts the zeros back.
void attention(const Node& node, ExportContext& c) {
  const DType dtype = node.output()->dtype();
  const int64_t rank = int64_t(node.input(0)->shape().size());
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    perm[size_t(d)] = d;
  std::swap(perm[size_t(rank - 2)], perm[size_t(rank - 1)]);
  pb::NodeProto* transpose = nullptr;
  std::string key_t = c.temp("Transpose", {c.name(node.input(1))}, &transpose);
  set_attr(*transpose, "perm", perm);
  std::string scores = c.temp("MatMul", {c.name(node.input(0)), key_t});
  const double scale = node.attrs().get_float("scale");
  if (scale != 1.0) scores = c.temp("Mul", {scores, c.scalar(scale, dtype)});
  const std::string minus_inf = c.scalar(-std::numeric_limits<double>::infinity(), dtype);
  const bool masked = node.inputs().size() > 3 && node.input(3);
  if (masked) {
    const jit::Value* mask = node.input(3);
    scores = mask->dtype() == DType::Bool ? c.temp("Where", {c.name(mask), scores, minus_inf})
                                          : c.temp("Add", {scores, c.name(mask)});
  }
  if (node.attrs().get_bool("is_causal")) {
    // The mask is a constant [L, S]: only those two sizes need be numbers.
    const Dim &query_len = node.input(0)->shape()[size_t(rank - 2)],
              &key_len = node.input(1)->shape()[size_t(rank - 2)];
    KILN_CHECK(query_len.is_static() && key_len.is_static(), "onnx export: ", node.op().name,
               " (node %", node.output()->id(),
               "): is_causal's mask needs concrete query and key lengths, got [", query_len, ", ",
               key_len, "]");
    const int64_t queries = query_len.static_value(), keys = key_len.static_value();
    Tensor allowed = zeros({queries, keys}, DType::Bool);
    for (int64_t i = 0; i < queries; ++i)
      for (int64_t j = 0; j <= std::min(i, keys - 1); ++j)
        allowed.data<bool>()[i * keys + j] = true;
    scores = c.temp("Where", {c.initializer(allowed), scores, minus_inf});
  }
  pb::NodeProto* softmax = nullptr;
  std::string weights = c.temp("Softmax", {scores}, &softmax);
  set_attr(*softmax, "axis", int64_t(-1));
  if (masked) {  // is_causal alone leaves every query key 0
    pb::NodeProto* row_max = nullptr;
    const std::string best = c.temp("ReduceMax", {scores}, &row_max);
    set_attr(*row_max, "axes", std::vector<int64_t>{-1});  // an attribute up to opset 17
    set_attr(*row_max, "keepdims", int64_t(1));
    const std::string sees_nothing = c.temp("Equal", {best, minus_inf});
    weights = c.temp("Where", {sees_nothing, c.scalar(0.0, dtype), weights});
  }
  c.node_for(node.output(), "MatMul", {weights, c.name(node.input(2))});
}

}  // namespace

void add_nn_exporters(Table& table) {
  table["conv2d"] = conv;
  table["conv3d"] = conv;
  table["conv_transpose2d"] = conv_transpose;
  table["conv_transpose3d"] = conv_transpose;
  table["max_pool2d"] = max_pool;
  table["max_pool3d"] = max_pool;
  table["avg_pool2d"] = avg_pool;
  table["avg_pool3d"] = avg_pool;
  table["adaptive_avg_pool2d"] = adaptive_avg_pool2d;
  table["dropout"] = dropout;
  table["batch_norm"] = batch_norm;
  table["layer_norm"] = layer_norm;
  table["scaled_dot_product_attention"] = attention;
}

}  // namespace kiln::onnx
