// Loop unrolling: a scan with a small static trip count becomes its step,
// inlined once per iteration, when that is faster than running the loop:
//   carry, ys = scan(init, xs, captures) {length=n}
//     -> c = init; for t = 0..n-1 (n-1..0 when reverse):
//          c, y_t = <step's nodes>(c, select(xs, 0, t), captures)
//        carry = c, ys = stack(y_0, ..., y_{n-1}) {dim=0}
// The step's ops run in the loop's order on the same values, and select and
// stack only move data, so the results are the loop's bit for bit. Unrolled,
// the copies meet the other passes: a fori_loop's counter folds to
// constants, elementwise tails fuse, invariants merge.
//
// When it is faster is measured (kMaxUnrolledBytes below): a loop stays
// unless length <= 64, length x step nodes <= 256 and length x bytes of the
// step's results <= 256 KiB. A step with effects always stays a loop.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "kiln/core/factory.h"
#include "kiln/core/shape.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"

namespace kiln::jit {
namespace {

// The rule, from bench/unroll_loops.py (one thread, µs per call, unrolled /
// loop): unrolling saves the loop's cost per iteration (running the step's
// plan over slices, copying the carries in and out), 0.05 to 0.5 µs, so
// small steps gain most (add on f32[16]: 0.57 to 0.91 at 1 to 64 trips, a
// fori_loop whose counter folds: 0.34 to 0.65). It loses where the values
// the copies keep (each y lives until the stack, each carry in a slot of
// its own) outgrow the cache the loop's two buffers stay in: from 512 KiB
// of step results on, up to 1.21 (add on f32[16384] x 64) and 1.96 (an rnn
// step on [16, 256] x 64; 1.5 at 32 trips). Within 256 KiB, two runs
// measured 0.34 to 1.06 (and one 1.18 that the other run saw as 0.94:
// noise on this shared machine).
constexpr int64_t kMaxUnrolledBytes = int64_t(256) << 10;
// Graph growth: compile time grows with the copies (a 1-node step: 0.7 ms
// more at 64 trips, 3.7 ms at 256), for gains per call that do not.
constexpr int64_t kMaxUnrolledNodes = 256;
// The trip counts measured.
constexpr int64_t kMaxTripCount = 64;
// A step that reads large weights (its captures and constants) spends its
// time streaming them, not on the loop: unrolled, W4's LSTM at batch 1
// (W_hh 1 MiB, 64 trips, 2 nodes a step) ran 3% slower than the loop in
// three runs (bench/rnn_w4.py's model, 2.43-2.53 vs 2.33-2.45 ms), an rnn
// step over a 256 KiB weight 0.96-1.06, one over 16 KiB 0.86-0.95.
constexpr int64_t kMaxReadBytes = int64_t(256) << 10;

// KILN_UNROLL=0 keeps every loop, KILN_UNROLL=all unrolls every scan of
// static length (to measure); unset, the rule above decides.
enum class Mode { Off, Rule, All };

Mode mode_from_environment() {
  const char* env = std::getenv("KILN_UNROLL");
  if (env == nullptr || *env == '\0') return Mode::Rule;
  std::string_view value = env;
  if (value == "0") return Mode::Off;
  if (value == "all") return Mode::All;
  KILN_CHECK_VALUE(value == "1", "KILN_UNROLL takes 0, 1 or all, got '", value, "'");
  return Mode::Rule;
}

// Bytes of the step's results (each value once: a carry may also be a y),
// or -1 when a size is symbolic.
int64_t result_bytes(const Graph& step) {
  int64_t bytes = 0;
  std::vector<const Value*> seen;
  for (const Value* v : step.outputs()) {
    if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
    seen.push_back(v);
    if (!is_static(v->shape())) return -1;
    bytes += numel_of(to_static(v->shape())) * int64_t(element_size(v->dtype()));
  }
  return bytes;
}

// Bytes of what every step reads the same: the captures and constants.
int64_t invariant_bytes(const Node& node, const ScanLayout& layout) {
  int64_t bytes = 0;
  const Graph& step = node.block(0);
  std::vector<const Value*> invariant(
      step.inputs().begin() + std::ptrdiff_t(layout.num_carry + layout.num_xs),
      step.inputs().end());
  invariant.insert(invariant.end(), step.constants().begin(), step.constants().end());
  for (const Value* v : invariant) {
    if (!is_static(v->shape())) return -1;
    bytes += numel_of(to_static(v->shape())) * int64_t(element_size(v->dtype()));
  }
  return bytes;
}

// Nodes of `block` and, depth first, of the blocks they own.
int64_t count_nodes(const Graph& block) {
  int64_t count = 0;
  for_each_graph(block, [&](const Graph& g) { count += int64_t(g.num_nodes()); });
  return count;
}

// has_effects reaches into nested blocks itself.
bool any_effects(const Graph& block) {
  const std::vector<Node*> nodes = block.nodes();
  return std::any_of(nodes.begin(), nodes.end(), [](const Node* n) { return has_effects(*n); });
}

// Whether `outer` may stand for the block value `inner` in the copied nodes:
// their types were inferred with `inner`'s promotion (a wrapped Python
// number promotes differently from a tensor).
bool same_promotion(const Value& inner, const Value& outer) {
  return inner.type().wrapped_number == outer.type().wrapped_number;
}

// Why `node` (a scan) stays a loop, or "" when it unrolls.
std::string reason_to_keep(const Node& node, Mode mode, const WrittenMemory& written) {
  const Dim length = node.attrs().get_dim("length");
  if (!length.is_static()) return "its length is symbolic";
  const ScanLayout layout = scan_layout(node);
  const Graph& step = node.block(0);
  // A step's effects (random draws, in-place writes) keep the loop: a write
  // into a carry would reach the init itself once inlined.
  if (any_effects(step)) return "its step has effects";
  // Copies of a node binding a size symbol (nonzero's count) would share
  // the symbol, each copy's run rebinding what the others were sized by.
  if (binds_size_symbols(step)) return "its step binds sizes its data decides";
  // Inlined, the slices and carries may be the scan's inputs (or views of
  // them) rather than buffers of its own: refused where the graph writes
  // into either side.
  for (const Value* in : node.inputs()) {
    if (written.aliases(*in)) return "the graph writes into one of its inputs";
  }
  for (const Value* out : node.outputs()) {
    if (written.aliases(*out)) return "the graph writes into one of its results";
  }
  for (size_t i = 0; i < layout.num_carry; ++i) {
    if (!same_promotion(*step.inputs()[i], *node.input(i)) ||
        !same_promotion(*step.inputs()[i], *step.outputs()[i]))
      return "a carry is a wrapped number";
  }
  for (size_t j = layout.num_carry; j < step.inputs().size(); ++j) {
    bool is_x = j < layout.num_carry + layout.num_xs;
    if (is_x ? step.inputs()[j]->type().wrapped_number
             : !same_promotion(*step.inputs()[j], *node.input(j)))
      return "an input is a wrapped number";
  }
  for (size_t j = layout.num_carry; j < step.outputs().size(); ++j) {
    const Value& y = *step.outputs()[j];
    if (y.type().wrapped_number) return "a y is a wrapped number";
    if (length.static_value() == 0 && !is_static(node.output(j)->shape()))
      return "an empty y has a symbolic shape";
  }
  if (mode == Mode::All) return "";
  const int64_t n = length.static_value();
  if (n > kMaxTripCount) return str("its length is over ", kMaxTripCount);
  if (n * count_nodes(step) > kMaxUnrolledNodes)
    return str("length x step nodes is over ", kMaxUnrolledNodes);
  const int64_t bytes = result_bytes(step);
  if (bytes < 0) return "its step's results have symbolic sizes";
  if (n * bytes > kMaxUnrolledBytes)
    return str("length x bytes of step results is over ", kMaxUnrolledBytes);
  const int64_t read = invariant_bytes(node, layout);
  if (read < 0 || read > kMaxReadBytes)
    return str("its step reads over ", kMaxReadBytes, " bytes of weights (or a symbolic size)");
  return "";
}

// The step's nodes copied once before `node`, its inputs standing for
// `feeds`; returns the values standing for its outputs. `constants` maps the
// step's constants to the graph's (one copy for every iteration).
std::vector<Value*> inline_step(Node& node, const std::vector<Value*>& feeds,
                                std::unordered_map<const Value*, Value*>& constants) {
  const Graph& step = node.block(0);
  Graph& graph = node.graph();
  std::unordered_map<const Value*, Value*> mapped;  // lookups only, never iterated
  for (size_t j = 0; j < feeds.size(); ++j)
    mapped[step.inputs()[j]] = feeds[j];
  auto map = [&](Value* v) -> Value* {
    if (v == nullptr) return nullptr;
    if (auto it = mapped.find(v); it != mapped.end()) return it->second;
    KILN_ASSERT(v->kind() == ValueKind::Constant, "unroll: a step value of no input or node");
    auto [it, inserted] = constants.try_emplace(v, nullptr);
    if (inserted) it->second = graph.add_constant(v->data(), v->type().wrapped_number);
    return it->second;
  };
  for (Node* inner : step.nodes()) {
    std::vector<Value*> inputs;
    for (Value* v : inner->inputs())
      inputs.push_back(map(v));
    Node* copy = graph.insert_copy_before(&node, *inner, std::move(inputs));
    for (size_t i = 0; i < inner->outputs().size(); ++i)
      mapped[inner->output(i)] = copy->output(i);
  }
  std::vector<Value*> results;
  for (Value* v : step.outputs())
    results.push_back(map(v));
  return results;
}

// No step ran: an empty y of the type the node declares.
Value* empty_like(Graph& graph, const Value& out) {
  return graph.add_constant(zeros(to_static(out.shape()), out.dtype()));
}

Value* stack(Node& before, const std::vector<Value*>& ys) {
  return before.graph().insert_before(&before, op("stack"), ys, {{"dim", int64_t(0)}})->output();
}

Value* select(Node& before, Value* xs, int64_t t) {
  Attrs attrs{{"dim", int64_t(0)}, {"index", t}};
  return before.graph().insert_before(&before, op("select"), {xs}, attrs)->output();
}

void unroll_scan(Node& node, PassContext& context) {
  Graph& graph = node.graph();
  const ScanLayout layout = scan_layout(node);
  const int64_t n = node.attrs().get_dim("length").static_value();
  const bool reverse = node.attrs().get_bool("reverse");
  const std::vector<Value*>& inputs = node.inputs();
  std::vector<Value*> carry(inputs.begin(), inputs.begin() + std::ptrdiff_t(layout.num_carry));
  std::vector<std::vector<Value*>> ys(layout.num_ys, std::vector<Value*>(size_t(n)));
  std::unordered_map<const Value*, Value*> constants;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t t = reverse ? n - 1 - k : k;
    std::vector<Value*> feeds = carry;
    for (size_t j = 0; j < layout.num_xs; ++j)
      feeds.push_back(select(node, node.input(layout.num_carry + j), t));
    feeds.insert(feeds.end(), inputs.end() - std::ptrdiff_t(layout.num_captures), inputs.end());
    std::vector<Value*> results = inline_step(node, feeds, constants);
    carry.assign(results.begin(), results.begin() + std::ptrdiff_t(layout.num_carry));
    for (size_t j = 0; j < layout.num_ys; ++j)
      ys[j][size_t(t)] = results[layout.num_carry + j];
  }
  for (size_t i = 0; i < layout.num_carry; ++i)
    node.output(i)->replace_all_uses_with(carry[i]);
  for (size_t j = 0; j < layout.num_ys; ++j) {
    Value* out = node.output(layout.num_carry + j);
    out->replace_all_uses_with(n == 0 ? empty_like(graph, *out) : stack(node, ys[j]));
  }
  context.count_rule(str("unroll a scan of length ", n));
  graph.erase(&node);
}

}  // namespace

bool unroll_loops(Graph& graph, PassContext& context) {
  const Mode mode = mode_from_environment();
  if (mode == Mode::Off) return false;
  std::optional<WrittenMemory> written;  // built on the first scan met
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op().name != "scan") continue;
    if (!written) written.emplace(graph);
    std::string reason = reason_to_keep(*node, mode, *written);
    if (!reason.empty()) {
      context.note("a scan stays a loop: " + reason);
      continue;
    }
    unroll_scan(*node, context);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::jit
