// Translations of ONNX's LSTM, GRU and RNN into the form of kiln's own
// recurrent layers (nn/rnn.h): per direction, the input projection of the
// whole sequence is one linear, then a scan over the time steps whose step
// is the hidden projection and the cell:
//
//   gi = linear(X, W_d, Wb_d)                       [T, batch, gates * H]
//   h_n, (c_n,) Y_d = scan(h0, (c0,) gi, R_d, Rb_d) {reverse for the
//                                                    backward direction}
//     step: gh = linear(h, R_d, Rb_d)
//           LSTM: lstm_cell_pointwise(gi_t, gh, c)
//           GRU:  gru_cell_pointwise(gi_t, gh, h)     (linear_before_reset=1)
//           RNN:  f(gi_t + gh), f one of Tanh, Relu, Sigmoid
//   Y = stack(Y_d..., dim 1), Y_h = stack(h_n..., dim 0), Y_c likewise
//
// ONNX's gate orders (LSTM i, o, f, c; GRU z, r, h) become kiln's, which
// are PyTorch's (i, f, g, o; r, z, n), by reordering the rows of W, R and
// B. A GRU with linear_before_reset=0 (ONNX's default; PyTorch exports 1)
// resets h before its product, n = tanh(gi_n + (r h) R_nᵀ + Rb_n), so its
// step is plain ops. layout=1 (batch first) transposes in and out.
//
// An LSTM with peepholes (P) runs its step as plain ops. sequence_lens
// shorter than the sequence (known at import, or specialized on) run one
// scan per batch element. Refused, naming the node and attribute:
// activations other than the defaults, clip, activation_alpha/beta and
// input_forget.
#include <algorithm>
#include <cctype>
#include <optional>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/onnx/import_context.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;
using Table = std::unordered_map<std::string, ImportFn>;

enum class Cell { Lstm, Gru, Rnn };

struct Spec {
  Cell cell;
  int64_t gates;  // 4, 3, 1
  int64_t hidden;
  int64_t num_directions;
  bool reverse_only;  // direction="reverse"
  bool batch_first;   // layout=1
  bool linear_before_reset;
  std::vector<std::string> activations;  // RNN: one per direction
  IntList order;                         // kiln's gates as ONNX's indices
};

std::string lower(std::string text) {
  for (char& ch : text)
    ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

std::vector<std::string> attr_strings(const Node& node, const std::string& name) {
  std::vector<std::string> values;
  if (const pb::AttributeProto* attr = find_attr(node, name))
    for (const std::string& value : attr->strings())
      values.push_back(value);
  return values;
}

std::string joined(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& value : values)
    text += (text.empty() ? "" : ", ") + value;
  return "[" + text + "]";
}

// The activations, checked: for LSTM and GRU only the defaults, for RNN
// one of Tanh, Relu, Sigmoid per direction (lowercased).
std::vector<std::string> read_activations(const Node& node, Cell cell, int64_t directions) {
  std::vector<std::string> given = attr_strings(node, "activations");
  std::vector<std::string> defaults =
      cell == Cell::Lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Tanh"};
  std::vector<std::string> expected;
  for (int64_t d = 0; d < directions; ++d)
    expected.insert(expected.end(), defaults.begin(), defaults.end());
  if (given.empty()) given = expected;
  KILN_CHECK(given.size() == expected.size(), "onnx import: ", node.op_type(), " attribute ",
             "'activations' ", joined(given), " has ", given.size(), " entries, ", directions,
             " direction(s) need ", expected.size());
  for (size_t k = 0; k < given.size(); ++k) {
    std::string name = lower(given[k]);
    bool plain = cell == Cell::Rnn && (name == "tanh" || name == "relu" || name == "sigmoid");
    KILN_CHECK(plain || name == lower(expected[k]), "onnx import: ", node.op_type(),
               " attribute 'activations' ", joined(given), " (kiln's ", node.op_type(),
               cell == Cell::Rnn ? " takes Tanh, Relu or Sigmoid" : " computes the defaults ",
               cell == Cell::Rnn ? "" : joined(defaults), ")");
    given[k] = name;
  }
  return given;
}

Spec read_spec(const Node& node, Cell cell, Value* r) {
  for (const char* name : {"clip", "activation_alpha", "activation_beta"})
    KILN_CHECK(!has_attr(node, name), "onnx import: ", node.op_type(), " attribute '", name,
               "' (kiln's cells take none)");
  KILN_CHECK(attr_int(node, "input_forget", 0) == 0, "onnx import: ", node.op_type(),
             " attribute 'input_forget'=1 (coupled input and forget gates)");
  Spec s{cell, cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1, 0, 1, false, false, true, {},
         {}};
  std::string direction = attr_string(node, "direction", "forward");
  KILN_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional",
             "onnx import: ", node.op_type(), " attribute 'direction'=", direction);
  s.num_directions = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  int64_t layout = attr_int(node, "layout", 0);
  KILN_CHECK(layout == 0 || layout == 1, "onnx import: ", node.op_type(),
             " attribute 'layout'=", layout);
  s.batch_first = layout == 1;
  s.linear_before_reset = cell != Cell::Gru || attr_int(node, "linear_before_reset", 0) != 0;
  KILN_CHECK(r && r->shape().size() == 3, "onnx import: ", node.op_type(), "'s R must be ",
             "[num_directions, gates * hidden, hidden]");
  s.hidden = concrete_size(node, 2, r, 2, node.op_type() + "'s hidden size");
  KILN_CHECK(attr_int(node, "hidden_size", s.hidden) == s.hidden, "onnx import: ", node.op_type(),
             " attribute 'hidden_size'=", attr_int(node, "hidden_size", 0), " but R is ",
             to_string(r->shape()));
  s.activations = read_activations(node, cell, s.num_directions);
  s.order = cell == Cell::Lstm  ? IntList{0, 2, 3, 1}
            : cell == Cell::Gru ? IntList{1, 0, 2}
                                : IntList{0};
  return s;
}

// The input's rows in kiln's gate order.
Value* reorder(ImportContext& c, const Spec& s, Value* rows) {
  if (s.gates == 1) return rows;
  std::vector<Value*> pieces;
  for (int64_t gate : s.order)
    pieces.push_back(c.emit(
        "narrow", {rows}, {{"dim", int64_t(0)}, {"start", gate * s.hidden}, {"length", s.hidden}}));
  return c.emit("cat", pieces, {{"dim", int64_t(0)}});
}

Value* rows(ImportContext& c, Value* x, int64_t start, int64_t length) {
  return c.emit("narrow", {x}, {{"dim", int64_t(0)}, {"start", start}, {"length", length}});
}

// sequence_lens where some sequence is shorter than the steps; nothing
// when absent or all full. Known at import: a constant, or specialized on
// the model input it comes from (Note [Value inputs]).
std::optional<IntList> sequence_lengths(const Node& node, ImportContext& c, const Dim& steps,
                                        const Dim& batch) {
  Value* lens = c.input(node, 4);
  if (!lens) return std::nullopt;
  IntList values = c.constant_ints(lens, node.op_type() + "'s sequence_lens");
  if (steps.is_static() && std::all_of(values.begin(), values.end(),
                                       [&](int64_t v) { return v == steps.static_value(); }))
    return std::nullopt;
  KILN_CHECK(steps.is_static() && batch.is_static() && int64_t(values.size()) == batch,
             "onnx import: ", node.op_type(), "'s sequence_lens ", values, " for ", steps,
             " steps and a batch of ", batch, " (shorter sequences need both static)");
  for (int64_t v : values)
    KILN_CHECK(v >= 1 && v <= steps.static_value(), "onnx import: ", node.op_type(),
               "'s sequence_lens ", values, " must lie in [1, ", steps, "]");
  return values;
}

// A state of direction d: from initial_h / initial_c, or zeros.
Value* initial_state(ImportContext& c, const Spec& s, Value* given, int64_t d, const Dim& batch,
                     DType dtype) {
  if (given) return c.emit("select", {given}, {{"dim", int64_t(s.batch_first)}, {"index", d}});
  DimList shape{batch, s.hidden};
  if (is_static(shape)) return c.constant(full(to_static(shape), 0.0, dtype));
  return c.emit("expand", {c.constant(full({}, 0.0, dtype))}, {{"size", shape}});
}

// Builds a step block: appends ops by name.
struct Step {
  std::unique_ptr<jit::Graph> graph = std::make_unique<jit::Graph>();

  Value* input(const TensorMeta& type) { return graph->add_input(type); }
  std::vector<Value*> ops(const std::string& name, const std::vector<Value*>& inputs,
                          const Attrs& attrs = {}) {
    return graph->append(op(name), inputs, attrs)->outputs();
  }
  Value* op1(const std::string& name, const std::vector<Value*>& inputs, const Attrs& attrs = {}) {
    return ops(name, inputs, attrs)[0];
  }
  Value* columns(Value* x, int64_t start, int64_t length) {
    return op1("narrow", {x}, {{"dim", int64_t(1)}, {"start", start}, {"length", length}});
  }
};

// The hidden projection's weights a step reads, as captures.
struct Weights {
  std::vector<Value*> outer;  // the values fed to the scan
  Value* add(Step& step, Value* value) {
    if (!value) return nullptr;
    outer.push_back(value);
    return step.input(value->type());
  }
};

// linear(h, R, Rb) with an absent Rb left out.
Value* project(Step& step, Value* h, Value* weight, Value* bias) {
  std::vector<Value*> inputs = {h, weight};
  if (bias) inputs.push_back(bias);
  return step.op1("linear", inputs);
}

// One direction's scan: its outputs (h_n, [c_n,] Y_d).
// LSTM with peepholes p = [p_i, p_o, p_f], as plain ops:
//   i = σ(a_i + p_i c), f = σ(a_f + p_f c), c' = f c + i tanh(a_g),
//   o = σ(a_o + p_o c'), h' = o tanh(c').
std::vector<Value*> peephole_cell(Step& step, Value* gates, Value* c, Value* p, int64_t H) {
  auto peep = [&](int64_t k, Value* state) {
    Value* weight = step.op1("narrow", {p}, {{"dim", int64_t(0)}, {"start", k * H}, {"length", H}});
    return step.op1("mul", {weight, state});
  };
  auto gate = [&](int64_t k) { return step.columns(gates, k * H, H); };
  Value* i = step.op1("sigmoid", {step.op1("add", {gate(0), peep(0, c)})});
  Value* f = step.op1("sigmoid", {step.op1("add", {gate(1), peep(2, c)})});
  Value* g = step.op1("tanh", {gate(2)});
  Value* c_new = step.op1("add", {step.op1("mul", {f, c}), step.op1("mul", {i, g})});
  Value* o = step.op1("sigmoid", {step.op1("add", {gate(3), peep(1, c_new)})});
  return {step.op1("mul", {o, step.op1("tanh", {c_new})}), c_new};
}

std::vector<Value*> direction_scan(ImportContext& c, const Spec& s, int64_t d, Value* gi,
                                   std::vector<Value*> states, Value* r, Value* rb,
                                   Value* peephole) {
  Step step;
  std::vector<Value*> carry;
  for (Value* state : states)
    carry.push_back(step.input(state->type()));
  TensorMeta slice = gi->type();
  slice.shape.erase(slice.shape.begin());
  Value* gi_t = step.input(slice);
  Weights weights;
  Value* h = carry[0];
  std::vector<Value*> next;
  const int64_t H = s.hidden;
  if (s.cell == Cell::Gru && !s.linear_before_reset) {
    Value* r_rz = weights.add(step, rows(c, r, 0, 2 * H));
    Value* r_n = weights.add(step, rows(c, r, 2 * H, H));
    Value* rb_rz = weights.add(step, rb ? rows(c, rb, 0, 2 * H) : nullptr);
    Value* rb_n = weights.add(step, rb ? rows(c, rb, 2 * H, H) : nullptr);
    Value* rz =
        step.op1("sigmoid",
                 {step.op1("add", {step.columns(gi_t, 0, 2 * H), project(step, h, r_rz, rb_rz)})});
    Value* reset = step.columns(rz, 0, H);
    Value* update = step.columns(rz, H, H);
    Value* hn = project(step, step.op1("mul", {reset, h}), r_n, rb_n);
    Value* n = step.op1("tanh", {step.op1("add", {step.columns(gi_t, 2 * H, H), hn})});
    next = {step.op1("add", {n, step.op1("mul", {update, step.op1("sub", {h, n})})})};
  } else {
    Value* r_step = weights.add(step, r);
    Value* gh = project(step, h, r_step, weights.add(step, rb));
    if (s.cell == Cell::Lstm && peephole) {
      Value* gates = step.op1("add", {gi_t, gh});
      next = peephole_cell(step, gates, carry[1], weights.add(step, peephole), H);
    } else if (s.cell == Cell::Lstm) {
      next = step.ops("lstm_cell_pointwise", {gi_t, gh, carry[1]});
    } else if (s.cell == Cell::Gru) {
      next = {step.op1("gru_cell_pointwise", {gi_t, gh, h})};
    } else {
      next = {step.op1(s.activations[size_t(d)], {step.op1("add", {gi_t, gh})})};
    }
  }
  std::vector<Value*> outputs = next;
  outputs.push_back(next[0]);
  step.graph->set_outputs(outputs);
  std::vector<TensorMeta> types;
  for (Value* state : states)
    types.push_back(state->type());
  TensorMeta ys = next[0]->type();
  ys.shape.insert(ys.shape.begin(), gi->shape()[0]);
  types.push_back(ys);
  std::vector<Value*> inputs = states;
  inputs.push_back(gi);
  inputs.insert(inputs.end(), weights.outer.begin(), weights.outer.end());
  std::vector<std::unique_ptr<jit::Graph>> blocks;
  blocks.push_back(std::move(step.graph));
  bool reverse = s.reverse_only || d == 1;
  jit::Node* made = c.graph().append_with_blocks(op("scan"), inputs,
                                                 {{"num_carry", int64_t(states.size())},
                                                  {"num_xs", int64_t(1)},
                                                  {"reverse", reverse},
                                                  {"length", canonical_attr(gi->shape()[0])}},
                                                 types, std::move(blocks));
  jit::infer_control_flow(*made);
  return made->outputs();
}

// One direction where sequences end early: each batch element's scan
// over its own steps, its Y zeros past them (as ONNX Runtime gives) and
// its final states those of its last step; joined along the batch.
std::vector<Value*> scan_by_length(ImportContext& c, const Spec& s, int64_t d, Value* x, Value* w,
                                   Value* wb, const std::vector<Value*>& states, Value* r,
                                   Value* rb, Value* peephole, const IntList& lengths) {
  auto narrow = [&](Value* v, int64_t dim, int64_t start, int64_t length) {
    return c.emit("narrow", {v}, {{"dim", dim}, {"start", start}, {"length", length}});
  };
  const int64_t steps = x->shape()[0].static_value();
  std::vector<std::vector<Value*>> parts(states.size() + 1);
  for (int64_t b = 0; b < int64_t(lengths.size()); ++b) {
    Value* x_b = narrow(narrow(x, 1, b, 1), 0, 0, lengths[size_t(b)]);
    std::vector<Value*> states_b;
    for (Value* state : states)
      states_b.push_back(narrow(state, 0, b, 1));
    std::vector<Value*> out =
        direction_scan(c, s, d, c.emit("linear", {x_b, w, wb}), states_b, r, rb, peephole);
    IntList pad(6, 0);  // kiln's pad lists the last dim first: Y_b's steps are last
    pad.back() = steps - lengths[size_t(b)];
    out.back() = c.emit("pad", {out.back()}, {{"pad", pad}, {"mode", std::string("constant")}});
    for (size_t k = 0; k < out.size(); ++k)
      parts[k].push_back(out[k]);
  }
  std::vector<Value*> joined;
  for (size_t k = 0; k < parts.size(); ++k)  // states [batch, H], Y [T, batch, H]
    joined.push_back(c.emit("cat", parts[k], {{"dim", int64_t(k + 1 == parts.size())}}));
  return joined;
}

// A stacked state [num_directions, batch, H], or [batch, num_directions, H]
// batch first.
Value* stacked_state(ImportContext& c, const Spec& s, const std::vector<Value*>& per_direction) {
  Value* stacked = c.emit("stack", per_direction, {{"dim", int64_t(0)}});
  if (!s.batch_first) return stacked;
  return c.emit("transpose", {stacked}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
}

void recurrent(const Node& node, ImportContext& c, Cell cell) {
  jit::GraphShapeScope facts(c.root_graph());
  Value* x = c.input(node, 0);
  Value* w = c.input(node, 1);
  Value* r = c.input(node, 2);
  Value* b = c.input(node, 3);
  KILN_CHECK(x && w && x->shape().size() == 3 && w->shape().size() == 3,
             "onnx import: ", node.op_type(), " needs a 3-D X and W");
  Spec s = read_spec(node, cell, r);
  Value* peepholes = cell == Cell::Lstm ? c.input(node, 7) : nullptr;
  if (peepholes && c.is_constant(peepholes) && !peepholes->data().to_vector<double>().empty()) {
    std::vector<double> values = peepholes->data().to_vector<double>();
    if (std::all_of(values.begin(), values.end(), [](double v) { return v == 0; }))
      peepholes = nullptr;  // zeros: the fused cell
  }
  KILN_CHECK(same_dims(w->shape(), {s.num_directions, s.gates * s.hidden, x->shape()[2]}),
             "onnx import: ", node.op_type(), "'s W is ", to_string(w->shape()), ", expected [",
             s.num_directions, ", ", s.gates * s.hidden, ", ", x->shape()[2], "]");
  if (s.batch_first) x = c.emit("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
  const Dim batch = x->shape()[1];
  std::optional<IntList> lengths = sequence_lengths(node, c, x->shape()[0], batch);
  const int64_t width = s.gates * s.hidden;
  std::vector<Value*> ys, h_n, c_n;
  for (int64_t d = 0; d < s.num_directions; ++d) {
    auto pick = [&](Value* v) {
      return c.emit("select", {v}, {{"dim", int64_t(0)}, {"index", d}});
    };
    Value *wb = nullptr, *rb = nullptr;
    if (b) {
      Value* bias = pick(b);
      wb = reorder(c, s, rows(c, bias, 0, width));
      rb = reorder(c, s, rows(c, bias, width, width));
    }
    Value* w_d = reorder(c, s, pick(w));
    Value* r_d = reorder(c, s, pick(r));
    Value* p_d = peepholes ? pick(peepholes) : nullptr;
    std::vector<Value*> states = {initial_state(c, s, c.input(node, 5), d, batch, x->dtype())};
    if (cell == Cell::Lstm)
      states.push_back(initial_state(c, s, c.input(node, 6), d, batch, x->dtype()));
    std::vector<Value*> out =
        lengths ? scan_by_length(c, s, d, x, w_d, wb, states, r_d, rb, p_d, *lengths)
                : direction_scan(c, s, d, c.emit("linear", {x, w_d, wb}), states, r_d, rb, p_d);
    h_n.push_back(out[0]);
    if (cell == Cell::Lstm) c_n.push_back(out[1]);
    ys.push_back(out.back());
  }
  Value* y = c.emit("stack", ys, {{"dim", int64_t(1)}});  // [T, directions, batch, H]
  if (s.batch_first) y = c.emit("permute", {y}, {{"dims", IntList{2, 0, 1, 3}}});
  c.define(node.output(0), y);
  if (node.output_size() > 1) c.define(node.output(1), stacked_state(c, s, h_n));
  if (node.output_size() > 2 && cell == Cell::Lstm)
    c.define(node.output(2), stacked_state(c, s, c_n));
}

void lstm(const Node& node, ImportContext& c) {
  recurrent(node, c, Cell::Lstm);
}
void gru(const Node& node, ImportContext& c) {
  recurrent(node, c, Cell::Gru);
}
void rnn(const Node& node, ImportContext& c) {
  recurrent(node, c, Cell::Rnn);
}

}  // namespace

void add_rnn_importers(Table& table) {
  table["LSTM"] = lstm;
  table["GRU"] = gru;
  table["RNN"] = rnn;
}

}  // namespace kiln::onnx
