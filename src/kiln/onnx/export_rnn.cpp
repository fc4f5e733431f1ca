// One direction of one nn.LSTM or nn.GRU layer, as kiln records it (nn/rnn.h),
// written as ONNX's LSTM or GRU op, which ONNX Runtime runs faster than the
// Scan form (docs/onnx.md has the timings):
//
//   %gi = linear(%x, %W_ih, %b_ih)                            %x: [T, batch, I]
//   %h_n, %c_n, %ys = scan(%h0, %c0, %gi, %W_hh, %b_hh) {num_carry=2, num_xs=1}
//     step(%h, %c, %gi_t, %R, %Rb) {
//       %gh = linear(%h, %R, %Rb)
//       %h2, %c2 = lstm_cell_pointwise(%gi_t, %gh, %c)
//       return (%h2, %c2, %h2)
//     }
//   -> LSTM(%x, W, R, B, "", h0[None], c0[None]) {direction, hidden_size}
//      %ys = Y[:, 0], %h_n = Y_h[0], %c_n = Y_c[0]
//
// A batch-first first layer projects before it goes time-major
// (%gi = transpose(linear(%x_bf, %W_ih, %b_ih)) {dim0=0, dim1=1}): X is then
// Transpose(%x_bf). R and Rb may also be constants of the step (a traced
// function's closure).
// W, R and B are the layer's weights with their rows in ONNX's gate order
// (Split + Concat on the initializers, which ONNX Runtime folds when it
// loads the model). A GRU is the same with one state and
// gru_cell_pointwise(%gi_t, %gh, %h): ONNX's GRU with linear_before_reset=1.
// Any other scan is left to the Scan translation; the projection, now
// unread, is dropped with the other dead nodes (export.cpp).
#include <optional>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/onnx/export_context.h"

namespace kiln::onnx {
namespace {

using jit::Graph;
using jit::Node;
using jit::Value;

struct Layer {
  bool lstm;
  const Node* projection;  // linear(x, W_ih, b_ih)
  bool batch_major;        // the projection reads x [batch, T, I] (transposed after)
  const Value* weight_hh;  // what the step's linear reads: node inputs or constants
  const Value* bias_hh;    // null when absent
  int64_t hidden;
};

bool is_op(const Node* node, const char* name) {
  return node && node->op().name == name;
}

// What a weight of the step's linear is outside the loop: the node input
// feeding a capture (an input after the carry and the slice), or a
// constant of the step (a function's closure traces its weights as
// constants); null for anything the step computes.
const Value* outer_weight(const Node& scan, const Value* value, size_t first_capture) {
  if (value->kind() == jit::ValueKind::Constant) return value;
  const Graph& step = scan.block(0);
  for (size_t k = first_capture; k < step.inputs().size(); ++k)
    if (step.inputs()[k] == value) return scan.input(k);
  return nullptr;
}

// The step's linear(h, R, Rb).
bool match_projection(const Node& scan, const Node& linear, size_t first_capture, Layer& layer) {
  if (linear.input(0) != scan.block(0).inputs()[0]) return false;
  layer.weight_hh = outer_weight(scan, linear.input(1), first_capture);
  layer.bias_hh = nullptr;
  if (linear.inputs().size() > 2 && linear.input(2)) {
    layer.bias_hh = outer_weight(scan, linear.input(2), first_capture);
    if (!layer.bias_hh) return false;
  }
  return layer.weight_hh != nullptr;
}

std::optional<Layer> match_layer(const Node& scan) {
  const jit::ScanLayout layout = jit::scan_layout(scan);
  if (layout.num_xs != 1 || layout.num_ys != 1 || (layout.num_carry != 1 && layout.num_carry != 2))
    return std::nullopt;
  const bool lstm = layout.num_carry == 2;
  const Graph& step = scan.block(0);
  const std::vector<Node*> nodes = step.nodes();
  if (nodes.size() != 2 || !is_op(nodes[0], "linear") ||
      !is_op(nodes[1], lstm ? "lstm_cell_pointwise" : "gru_cell_pointwise"))
    return std::nullopt;
  const Node& cell = *nodes[1];
  const Value* x_t = step.inputs()[layout.num_carry];
  const Value* state = step.inputs()[lstm ? 1 : 0];
  if (cell.input(0) != x_t || cell.input(1) != nodes[0]->output() || cell.input(2) != state)
    return std::nullopt;
  const std::vector<Value*> expected =
      lstm ? std::vector<Value*>{cell.output(0), cell.output(1), cell.output(0)}
           : std::vector<Value*>{cell.output(0), cell.output(0)};
  if (step.outputs() != expected) return std::nullopt;
  Layer layer{lstm, scan.input(layout.num_carry)->producer(), false, nullptr, nullptr, 0};
  const Node* to_time_major = layer.projection;
  if (is_op(to_time_major, "transpose") && to_time_major->attrs().get_int("dim0") == 0 &&
      to_time_major->attrs().get_int("dim1") == 1) {
    layer.projection = to_time_major->input(0)->producer();
    layer.batch_major = true;
  }
  if (!match_projection(scan, *nodes[0], layout.num_carry + 1, layer)) return std::nullopt;
  if (!is_op(layer.projection, "linear") || layer.projection->input(0)->shape().size() != 3)
    return std::nullopt;
  const DimList& h = scan.input(0)->shape();
  if (h.size() != 2 || !h[1].is_static() || !is_floating(scan.input(0)->dtype()))
    return std::nullopt;
  layer.hidden = h[1].static_value();
  return layer;
}

// Rows of kiln's gates [i, f, g, o] / [r, z, n] in ONNX's order
// [i, o, f, c] / [z, r, h].
std::string onnx_gate_order(const std::string& rows, const Layer& layer, ExportContext& c) {
  const std::vector<size_t> order =
      layer.lstm ? std::vector<size_t>{0, 3, 1, 2} : std::vector<size_t>{1, 0, 2};
  std::vector<std::string> gates;
  for (size_t k = 0; k < order.size(); ++k)
    gates.push_back(c.fresh("gate"));
  auto& split = c.node("Split", {rows}, gates);
  set_attr(split, "axis", int64_t(0));
  std::vector<std::string> reordered;
  for (size_t k : order)
    reordered.push_back(gates[k]);
  pb::NodeProto* made = nullptr;
  std::string out = c.temp("Concat", reordered, &made);
  set_attr(*made, "axis", int64_t(0));
  return out;
}

std::string with_direction_dim(const std::string& name, ExportContext& c) {
  return c.temp("Unsqueeze", {name, c.ints({0})});
}

// B: [Wb, Rb] in ONNX's gate order, an absent half as zeros; "" when both are.
std::string bias(const Layer& layer, ExportContext& c) {
  const Node& projection = *layer.projection;
  const Value* bias_ih = projection.inputs().size() > 2 ? projection.input(2) : nullptr;
  if (!bias_ih && !layer.bias_hh) return "";
  const int64_t width = (layer.lstm ? 4 : 3) * layer.hidden;
  DType dtype = projection.input(1)->dtype();
  auto half = [&](const Value* value) {
    std::string rows = value ? c.name(value) : c.initializer(full({width}, 0.0, dtype));
    return onnx_gate_order(rows, layer, c);
  };
  pb::NodeProto* made = nullptr;
  std::string both = c.temp("Concat", {half(bias_ih), half(layer.bias_hh)}, &made);
  set_attr(*made, "axis", int64_t(0));
  return with_direction_dim(both, c);
}

}  // namespace

bool export_rnn_layer(const Node& scan, ExportContext& c) {
  std::optional<Layer> layer = match_layer(scan);
  if (!layer) return false;
  const Node& projection = *layer->projection;
  std::string x = c.name(projection.input(0));
  if (layer->batch_major) {
    pb::NodeProto* made = nullptr;
    x = c.temp("Transpose", {x}, &made);
    set_attr(*made, "perm", std::vector<int64_t>{1, 0, 2});
  }
  std::vector<std::string> inputs = {
      x,
      with_direction_dim(onnx_gate_order(c.name(projection.input(1)), *layer, c), c),
      with_direction_dim(onnx_gate_order(c.name(layer->weight_hh), *layer, c), c),
      bias(*layer, c),
      "",
      with_direction_dim(c.name(scan.input(0)), c)};
  if (layer->lstm) inputs.push_back(with_direction_dim(c.name(scan.input(1)), c));
  std::vector<std::string> outputs = {c.fresh("Y"), c.fresh("Y_h")};
  if (layer->lstm) outputs.push_back(c.fresh("Y_c"));
  auto& made = c.node(layer->lstm ? "LSTM" : "GRU", inputs, outputs);
  set_attr(made, "hidden_size", layer->hidden);
  set_attr(made, "direction",
           std::string(scan.attrs().get_bool("reverse") ? "reverse" : "forward"));
  if (!layer->lstm) set_attr(made, "linear_before_reset", int64_t(1));
  const size_t states = layer->lstm ? 2 : 1;
  c.node_for(scan.output(states), "Squeeze", {outputs[0], c.ints({1})});
  for (size_t k = 0; k < states; ++k)
    c.node_for(scan.output(k), "Squeeze", {outputs[k + 1], c.ints({0})});
  return true;
}

}  // namespace kiln::onnx
