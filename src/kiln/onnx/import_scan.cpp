// ONNX's Scan as kiln's scan (jit/ir/control_flow.h):
//
//   Scan(s..., xs...)              -> scan(s..., xs..., captures...); axes
//                                     other than 0 move to the front and
//                                     back, and a direction that differs
//                                     from the rest flips its tensor
//   Scan-8(lens, s..., xs...)      -> one such scan per batch element,
//                                     stacked
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/onnx/import_blocks.h"
#include "kiln/onnx/import_context.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// x with dim 0 reversed (a static length: an index_select).
Value* flip(const Node& node, ImportContext& c, Value* x, const std::string& name) {
  const Dim& size = x->shape().at(0);
  KILN_CHECK(size.is_static(), "onnx import: Scan reads '", name, "' in the other direction than ",
             "its other inputs and outputs, which kiln reverses at a static length only (got ",
             size, ")");
  IntList order;
  for (int64_t k = size.static_value() - 1; k >= 0; --k)
    order.push_back(k);
  Value* index = c.constant(
      tensor_from_data(order.data(), DType::Int64, {int64_t(order.size())}, DType::Int64));
  return c.emit("index_select", {x, index}, {{"dim", int64_t(0)}});
}

// Moves dim `from` of x to position `to`.
Value* move_dim(ImportContext& c, Value* x, int64_t from, int64_t to) {
  if (from == to) return x;
  IntList dims;
  for (int64_t d = 0; d < int64_t(x->shape().size()); ++d)
    if (d != from) dims.push_back(d);
  dims.insert(dims.begin() + to, from);
  return c.emit("permute", {x}, {{"dims", dims}});
}

int64_t wrap_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

// Scan's directions and axes, one per scan input and output.
struct ScanForm {
  IntList in_dirs, out_dirs, in_axes, out_axes;
};

// kiln's scan over `xs` (their scan axes and directions as `form` says)
// carrying `states`: the final states, then the ys, placed as `form` says.
std::vector<Value*> scan_over(const Node& node, ImportContext& c, const std::vector<Value*>& states,
                              std::vector<Value*> xs, const std::vector<std::string>& names,
                              const ScanForm& form, int first_state = 0) {
  const bool reverse =
      std::all_of(form.in_dirs.begin(), form.in_dirs.end(), [](int64_t d) { return d == 1; });
  std::vector<TensorMeta> formal = types_of(states);
  for (size_t j = 0; j < xs.size(); ++j) {
    Value*& x = xs[j];
    x = move_dim(c, x, wrap_axis(form.in_axes[j], int64_t(x->shape().size())), 0);
    if ((form.in_dirs[j] == 1) != reverse) x = flip(node, c, x, names[j]);
    KILN_CHECK(same_dims({x->shape()[0]}, {xs[0]->shape()[0]}), "onnx import: Scan's input '",
               names[j], "' has ", x->shape()[0], " steps, '", names[0], "' ", xs[0]->shape()[0]);
    TensorMeta slice = x->type();
    slice.shape.erase(slice.shape.begin());
    formal.push_back(slice);
  }
  check_tensors(c, join(states, xs),
                "Scan reads it as a tensor, and kiln makes no tensor of sizes");
  Block body = import_block(node, "body", formal, c);
  const size_t num_states = states.size();
  KILN_CHECK(body.outputs.size() == num_states + form.out_dirs.size(), "onnx import: Scan's ",
             "body gives ", body.outputs.size(), " outputs for ", num_states, " states and ",
             form.out_dirs.size(), " scan outputs");
  for (size_t k = 0; k < num_states; ++k)
    check_carried(node, "body", states[k], body.outputs[k], node.input(first_state + int(k)));
  body.graph->set_outputs(body.outputs);
  const Dim length = xs[0]->shape()[0];
  std::vector<TensorMeta> types = types_of(states);
  for (size_t k = num_states; k < body.outputs.size(); ++k) {
    TensorMeta y = body.outputs[k]->type();
    y.shape.insert(y.shape.begin(), length);
    types.push_back(y);
  }
  std::vector<std::unique_ptr<jit::Graph>> blocks;
  blocks.push_back(std::move(body.graph));
  jit::Node* made = c.graph().append_with_blocks(op("scan"), join(join(states, xs), body.captures),
                                                 {{"num_carry", int64_t(num_states)},
                                                  {"num_xs", int64_t(xs.size())},
                                                  {"reverse", reverse},
                                                  {"length", canonical_attr(length)}},
                                                 types, std::move(blocks));
  jit::infer_control_flow(*made);
  std::vector<Value*> results = made->outputs();
  for (size_t y = 0; y < form.out_dirs.size(); ++y) {
    Value*& result = results[num_states + y];
    if ((form.out_dirs[y] == 1) != reverse) result = flip(node, c, result, "a scan output");
    result = move_dim(c, result, 0, wrap_axis(form.out_axes[y], int64_t(result->shape().size())));
  }
  return results;
}

// Scan of opset 8: every input and output has a batch axis first (scan
// inputs and outputs their steps second), and sequence_lens (optional,
// known at import) may shorten a batch element's scan, whose outputs are
// then zeros past its length. One scan per batch element, stacked.
void scan8(const Node& node, ImportContext& c, int64_t num_xs) {
  const int64_t num_states = node.input_size() - 1 - num_xs;
  KILN_CHECK(num_xs >= 1 && num_states >= 0, "onnx import: Scan with num_scan_inputs=", num_xs,
             " and ", node.input_size(), " inputs");
  const int64_t num_ys = graph_attr(node, "body").output_size() - num_states;
  ScanForm form{attr_ints(node, "directions", IntList(size_t(num_xs), 0)),
                IntList(size_t(std::max<int64_t>(num_ys, 0)), 0), IntList(size_t(num_xs), 0),
                IntList(size_t(std::max<int64_t>(num_ys, 0)), 0)};
  KILN_CHECK(num_ys >= 0 && int64_t(form.in_dirs.size()) == num_xs, "onnx import: Scan's body ",
             "or directions do not match its ", num_states, " states and ", num_xs, " inputs");
  std::vector<Value*> inputs;
  std::vector<std::string> names;
  for (int k = 1; k < node.input_size(); ++k) {
    inputs.push_back(c.input(node, k));
    names.push_back(node.input(k));
  }
  const int64_t batch = concrete_size(node, 1, inputs[0], 0, "Scan of opset 8 (a scan per batch)");
  const int64_t steps = concrete_size(node, int(num_states) + 1, inputs[size_t(num_states)], 1,
                                      "Scan of opset 8 with sequence_lens");
  IntList lengths(size_t(batch), steps);
  if (Value* lens = c.input(node, 0)) lengths = c.constant_ints(lens, "Scan's sequence_lens");
  KILN_CHECK(int64_t(lengths.size()) == batch, "onnx import: Scan's sequence_lens holds ",
             lengths.size(), " lengths for a batch of ", batch);
  std::vector<std::vector<Value*>> per_output(size_t(num_states + num_ys));
  for (int64_t b = 0; b < batch; ++b) {
    KILN_CHECK(lengths[size_t(b)] >= 1 && lengths[size_t(b)] <= steps, "onnx import: Scan's ",
               "sequence_lens ", lengths, " must lie in [1, ", steps, "]");
    std::vector<Value*> row;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Value* value = c.emit("select", {inputs[k]}, {{"dim", int64_t(0)}, {"index", b}});
      if (int64_t(k) >= num_states)
        value =
            c.emit("narrow", {value},
                   {{"dim", int64_t(0)}, {"start", int64_t(0)}, {"length", lengths[size_t(b)]}});
      row.push_back(value);
    }
    std::vector<Value*> states(row.begin(), row.begin() + num_states);
    std::vector<Value*> xs(row.begin() + num_states, row.end());
    std::vector<std::string> xs_names(names.begin() + num_states, names.end());
    std::vector<Value*> results = scan_over(node, c, states, xs, xs_names, form, 1);
    for (size_t k = 0; k < results.size(); ++k) {
      Value* result = results[k];
      int64_t missing = steps - lengths[size_t(b)];
      if (int64_t(k) >= num_states && missing > 0) {
        IntList pad(2 * result->shape().size(), 0);
        pad.back() = missing;  // kiln's pad lists the last dim first: dim 0's end is last
        result = c.emit("pad", {result}, {{"pad", pad}, {"mode", std::string("constant")}});
      }
      per_output[k].push_back(result);
    }
  }
  for (size_t k = 0; k < per_output.size() && int(k) < node.output_size(); ++k)
    c.define(node.output(int(k)), c.emit("stack", per_output[k], {{"dim", int64_t(0)}}));
}

void scan_op(const Node& node, ImportContext& c) {
  const int64_t num_xs = attr_int(node, "num_scan_inputs", -1);
  if (c.opset() < 9) return scan8(node, c, num_xs);
  const int64_t num_states = node.input_size() - num_xs;
  KILN_CHECK(num_xs >= 1 && num_states >= 0, "onnx import: Scan with num_scan_inputs=", num_xs,
             " and ", node.input_size(), " inputs");
  const int64_t num_ys = graph_attr(node, "body").output_size() - num_states;
  KILN_CHECK(num_ys >= 0, "onnx import: Scan's body gives fewer outputs than its ", num_states,
             " states");
  ScanForm form{attr_ints(node, "scan_input_directions", IntList(size_t(num_xs), 0)),
                attr_ints(node, "scan_output_directions", IntList(size_t(num_ys), 0)),
                attr_ints(node, "scan_input_axes", IntList(size_t(num_xs), 0)),
                attr_ints(node, "scan_output_axes", IntList(size_t(num_ys), 0))};
  KILN_CHECK(int64_t(form.in_dirs.size()) == num_xs && int64_t(form.in_axes.size()) == num_xs &&
                 int64_t(form.out_dirs.size()) == num_ys && int64_t(form.out_axes.size()) == num_ys,
             "onnx import: Scan's scan_input_* / scan_output_* attributes need one entry per ",
             "scan input (", num_xs, ") and output (", num_ys, ")");
  std::vector<Value*> states, xs;
  std::vector<std::string> names;
  for (int k = 0; k < node.input_size(); ++k) {
    (k < num_states ? states : xs).push_back(c.input(node, k));
    if (k >= num_states) names.push_back(node.input(k));
  }
  std::vector<Value*> results = scan_over(node, c, states, xs, names, form);
  for (int k = 0; k < node.output_size() && size_t(k) < results.size(); ++k)
    c.define(node.output(k), results[size_t(k)]);
}
}  // namespace

void add_scan_importers(std::unordered_map<std::string, ImportFn>& table) {
  table["Scan"] = scan_op;
}

}  // namespace kiln::onnx
