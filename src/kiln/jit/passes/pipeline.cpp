#include "kiln/jit/passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/passes/passes.h"

namespace kiln::jit {
namespace {

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item(text.substr(start, comma - start));
    if (!item.empty()) items.push_back(std::move(item));
    start = comma + 1;
  }
  return items;
}

std::string known_pass_names() {
  std::string names;
  for (const PassInfo& info : pass_registry().all())
    names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool wants_dump(const PassOptions& options, const std::string& pass) {
  const auto& names = options.dump_after;
  return std::find(names.begin(), names.end(), pass) != names.end() ||
         std::find(names.begin(), names.end(), "all") != names.end();
}

void dump(const Graph& graph, const PassOptions& options, const std::string& pass, int round) {
  std::ostream& os = options.dump_stream ? *options.dump_stream : std::cerr;
  os << "# IR after " << pass << " (round " << round << ")\n" << to_text(graph) << std::flush;
}

// `when` says which graph failed: "after pass 'cse'", "before any pass".
void verify_graph(const Graph& graph, const std::string& when) {
  try {
    verify(graph);
  } catch (const Error& e) {
    throw Error(e.kind(), str("the graph is invalid ", when, ": ", e.what()));
  }
}

// Runs one pass and records it; returns whether it changed the graph.
bool run_one(Graph& graph, const PassInfo& info, PassContext& context, int round) {
  const PassOptions& options = context.options();
  context.begin_pass(info.name, graph.num_nodes());
  auto start = std::chrono::steady_clock::now();
  // The graph and, through the one walk, every block: one entry in the report.
  bool changed = false;
  for_each_graph(graph, [&](Graph& g) { changed |= info.run(g, context); });
  context.end_pass(graph.num_nodes(), seconds_since(start), changed);
  if (options.verify) verify_graph(graph, "after pass '" + info.name + "'");
  if (wants_dump(options, info.name)) dump(graph, options, info.name, round);
  return changed;
}

}  // namespace

// ---------------------------------------------------------------- options

bool PassOptions::verify_passes_by_default() {
  if (const char* env = std::getenv("KILN_VERIFY_PASSES")) return std::string_view(env) != "0";
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

std::vector<std::string> PassOptions::dump_ir_from_environment() {
  const char* env = std::getenv("KILN_DUMP_IR");
  return env ? split_list(env) : std::vector<std::string>{};
}

PassOptions pass_options_from_args(const std::vector<std::string>& args) {
  PassOptions options;
  for (const std::string& arg : args) {
    std::string_view a = arg;
    if (a.starts_with("--passes=")) {
      options.passes = split_list(a.substr(9));
      KILN_CHECK_VALUE(!options.passes.empty(),
                       "--passes= names no pass (known: ", known_pass_names(), ")");
      for (const std::string& name : options.passes)
        pass_registry().get(name);
    } else if (a == "--fast-math") {
      options.fast_math = true;
    } else if (a == "--frozen") {
      options.frozen = true;
    } else if (a == "--exact") {
      options.exact = true;
    } else if (a.starts_with("--max-rounds=")) {
      std::string number(a.substr(13));
      char* end = nullptr;
      long rounds = std::strtol(number.c_str(), &end, 10);
      KILN_CHECK_VALUE(!number.empty() && *end == '\0' && rounds >= 1 && rounds <= 1000,
                       "--max-rounds= takes a number from 1 to 1000, got '", number, "'");
      options.max_rounds = int(rounds);
    } else {
      KILN_CHECK_VALUE(false, "unknown pass option '", arg,
                       "' (known: --passes=a,b,c --fast-math --frozen --exact --max-rounds=N)");
    }
  }
  return options;
}

// ---------------------------------------------------------------- context

PassRecord& PassContext::current() {
  KILN_ASSERT(current_ < report_.passes.size(), "no pass is running");
  return report_.passes[current_];
}

void PassContext::count_rule(std::string_view rule, int64_t times) {
  auto& rules = current().rules;
  auto it =
      std::find_if(rules.begin(), rules.end(), [&](const auto& r) { return r.first == rule; });
  if (it == rules.end()) {
    rules.emplace_back(std::string(rule), times);
    return;
  }
  it->second += times;
}

void PassContext::note(std::string_view text) {
  auto& notes = current().notes;
  if (std::find(notes.begin(), notes.end(), text) == notes.end()) notes.emplace_back(text);
}

void PassContext::begin_pass(const std::string& name, size_t nodes_before) {
  auto& passes = report_.passes;
  auto it = std::find_if(passes.begin(), passes.end(),
                         [&](const PassRecord& r) { return r.name == name; });
  if (it == passes.end()) {
    passes.push_back(PassRecord{.name = name, .nodes_before = nodes_before});
    it = passes.end() - 1;
  }
  current_ = size_t(it - passes.begin());
}

void PassContext::end_pass(size_t nodes_after, double seconds, bool changed) {
  PassRecord& record = current();
  record.nodes_after = nodes_after;
  record.runs += 1;
  record.runs_changed += changed;
  record.seconds += seconds;
}

// ---------------------------------------------------------------- registry

void PassRegistry::add(PassInfo info) {
  KILN_CHECK_VALUE(!info.name.empty() && info.run, "a pass needs a name and a function");
  KILN_CHECK_VALUE(find(info.name) == nullptr, "pass '", info.name, "' is already registered");
  passes_.push_back(std::move(info));
}

const PassInfo* PassRegistry::find(std::string_view name) const {
  auto it = std::find_if(passes_.begin(), passes_.end(),
                         [&](const PassInfo& p) { return p.name == name; });
  return it == passes_.end() ? nullptr : &*it;
}

const PassInfo& PassRegistry::get(std::string_view name) const {
  const PassInfo* info = find(name);
  KILN_CHECK_VALUE(info != nullptr, "unknown pass '", name, "' (known: ", known_pass_names(), ")");
  return *info;
}

PassRegistry& pass_registry() {
  static PassRegistry* registry = [] {
    auto* r = new PassRegistry();  // never destroyed: passes may run during exit
    register_builtin_passes(*r);
    return r;
  }();
  return *registry;
}

void register_builtin_passes(PassRegistry& registry) {
  registry.add({.name = "constant_fold",
                .run = constant_fold,
                .summary = "nodes over constants (frozen: and parameters) become constants"});
  registry.add({.name = "peephole",
                .run = peephole,
                .summary = "algebraic simplifications from a table of rules (x*1 -> x, ...)"});
  registry.add({.name = "cse",
                .run = cse,
                .summary = "repeated computations and repeated constants are merged"});
  registry.add({.name = "dce", .run = dce, .summary = "unused nodes and constants are removed"});
  registry.add({.name = "simplify_control_flow",
                .run = simplify_control_flow,
                .summary = "constant conds inline, loop invariants hoist, unread inputs go"});
  registry.add({.name = "unroll_loops",
                .run = unroll_loops,
                .summary = "scans with a small static trip count become their steps, inline"});
  registry.add({.name = "fold_batch_norm",
                .run = fold_batch_norm,
                .summary = "frozen: batch_norm (eval) folds into the conv2d/linear before it "
                           "(not with exact)",
                .may_change_rounding = true});
  registry.add({.name = "fuse_conv_epilogue",
                .run = fuse_conv_epilogue,
                .summary = "frozen: conv2d + residual add + activation (relu, clamp, "
                           "hardsigmoid, hardswish, sigmoid, silu, tanh) become one "
                           "conv2d_fused (not with exact)",
                .may_change_rounding = true});
  registry.add({.name = "carry_conv_layout",
                .run = carry_conv_layout,
                .summary = "frozen: chains of convolutions keep oneDNN's channels-last layout "
                           "between them (conv2d_fused layout=nhwc; not with exact)",
                .may_change_rounding = true});
  registry.add({.name = "fuse_activations",
                .run = fuse_activations,
                .summary = "linear/conv2d + relu/sigmoid/tanh become one fused op"});
  registry.add({.name = "fuse_elementwise",
                .run = fuse_elementwise,
                .summary = "chains of elementwise ops become one fused_elementwise op"});
  register_transformer_passes(registry);
}

// ---------------------------------------------------------------- default pipeline

const std::vector<PipelineStep>& default_pipeline_steps() {
  static const std::vector<PipelineStep> steps = {
      // First: constant subgraphs (cast(number), ...) become the constants
      // the peephole rules read (x * cast(1) -> x).
      {"constant_fold"},
      // After folding, to see constant operands; before cse, since a
      // simplified node (exp(x * 1) -> exp(x)) may duplicate another.
      {"peephole"},
      // Merges the duplicates the rewrites above exposed.
      {"cse"},
      // After folding (a predicate may have become constant) and cse (one
      // invariant, not several copies, hoists).
      {"simplify_control_flow"},
      // Drops what the passes above left unused, so the fusions below see
      // the real readers (a dead reader blocks fusing: "read elsewhere").
      {"dce"},
      // Before fuse_activations: folding the batch_norm between a
      // conv2d/linear and its relu leaves a pair to fuse in the same round.
      // On by default in frozen graphs (inference), off with exact.
      {"fold_batch_norm", /*fast_math_only=*/true, /*frozen_unless_exact=*/true},
      {"fuse_attention", /*fast_math_only=*/true, /*frozen_unless_exact=*/true},
      // After fold_batch_norm (conv + bn + relu is then conv + relu) and
      // before fuse_activations, which would take conv2d + relu alone.
      {"fuse_conv_epilogue", /*fast_math_only=*/true, /*frozen_unless_exact=*/true},
      // After fuse_conv_epilogue, whose fused ops it chains, and before
      // fuse_activations, which would take a conv2d it may chain.
      {"carry_conv_layout", /*fast_math_only=*/true, /*frozen_unless_exact=*/true},
      // Before fuse_elementwise, which would take the relu/sigmoid/tanh
      // after a linear/conv2d into an elementwise group instead.
      {"fuse_activations"},
      {"fuse_linear_gelu"},
      // Last: its fused op hides its members from every pass above.
      {"fuse_elementwise"},
  };
  return steps;
}

std::vector<std::string> default_pipeline(bool fast_math) {
  return default_pipeline(PassOptions{.fast_math = fast_math});
}

std::vector<std::string> default_pipeline(const PassOptions& options) {
  const bool inference = options.frozen && !options.exact;
  std::vector<std::string> names;
  for (const PipelineStep& step : default_pipeline_steps()) {
    const bool runs =
        !step.fast_math_only || options.fast_math || (step.frozen_unless_exact && inference);
    if (runs) names.push_back(step.pass);
  }
  return names;
}

// ---------------------------------------------------------------- optimize

PassReport optimize(Graph& graph, const PassOptions& options) {
  std::vector<std::string> names =
      options.passes.empty() ? default_pipeline(options) : options.passes;
  std::vector<const PassInfo*> passes;
  for (const std::string& name : names)
    passes.push_back(&pass_registry().get(name));
  return run_passes(graph, passes, options);
}

PassReport run_passes(Graph& graph, const std::vector<const PassInfo*>& passes,
                      const PassOptions& options) {
  auto start = std::chrono::steady_clock::now();
  // Rewrites infer new nodes over symbolic sizes: the graph's guards decide
  // what the trace decided (linear's `features == 512`), not a missing env.
  GraphShapeScope facts(graph);
  PassContext context(options);
  context.report().nodes_before = graph.num_nodes();
  if (options.verify) verify_graph(graph, "before any pass");
  PassReport& report = context.report();
  while (report.rounds < std::max(options.max_rounds, 1)) {
    report.rounds += 1;
    bool changed = false;
    // Each pass runs over the graph and, through the one walk, every block.
    for (const PassInfo* info : passes) {
      for_each_graph(graph,
                     [&](Graph& g) { changed |= run_one(g, *info, context, report.rounds); });
    }
    if (!changed) {
      report.reached_fixed_point = true;
      break;
    }
  }
  report.nodes_after = graph.num_nodes();
  report.seconds = seconds_since(start);
  return std::move(report);
}

}  // namespace kiln::jit
