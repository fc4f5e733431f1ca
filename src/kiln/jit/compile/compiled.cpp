#include "kiln/jit/compile/compiled.h"

#include "kiln/jit/compile/control_flow_grad.h"
#include "kiln/jit/compile/per_size_runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "kiln/autograd/autograd.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/jit/exec/interpreter.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/jit/passes/pipeline.h"
#include "kiln/ops/copy.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::jit {
namespace {

std::mutex g_factory_mutex;
RunnerFactory g_runner_factory;

bool has_scan(const Graph& graph) {
  bool found = false;
  for_each_graph(graph, [&](const Graph& g) {
    for (const Node* node : g.nodes())
      found = found || node->op().name == "scan";
  });
  return found;
}

// The graph a plan is lowered from. With `unroll`, scans with a small
// static trip count are unrolled (unroll_loops, whose rule is measured),
// then the default pipeline runs again so the copies fold and fuse (a
// fori_loop's counter becomes constants). Only the plan sees this: the
// graph users print, save and export keeps its loops.
std::shared_ptr<const Graph> graph_to_lower(const std::shared_ptr<const Graph>& graph, bool unroll,
                                            PassReport& report) {
  if (!unroll || !has_scan(*graph)) return graph;
  std::shared_ptr<Graph> copy = graph->clone();
  report = optimize(*copy, {.passes = {"unroll_loops"}});
  if (report.passes.empty() || report.passes[0].runs_changed == 0) return graph;
  PassReport again = optimize(*copy);
  report.nodes_after = again.nodes_after;
  report.seconds += again.seconds;
  return copy;
}

// `into`: the state updates of parameters, which the Executable writes in
// place (a factory's runner returns them as fresh tensors to copy instead);
// matched by name in the graph lowered.
std::shared_ptr<const GraphRunner> make_runner(const std::shared_ptr<const Graph>& graph,
                                               std::span<const OutputIntoParam> into, bool unroll,
                                               std::shared_ptr<const Graph>& lowered,
                                               PassReport& report) {
  lowered = graph;
  RunnerFactory factory;
  {
    std::lock_guard<std::mutex> lock(g_factory_mutex);
    factory = g_runner_factory;
  }
  if (factory) return factory(graph);
  if (binds_size_symbols(*graph)) {  // the Executable runs it at run time: say so
    PassRecord record{
        .name = "plan", .nodes_before = graph->num_nodes(), .nodes_after = graph->num_nodes()};
    record.notes.push_back(
        "no arena: a node's output size is bound only when it runs (Note [Data-dependent "
        "output shapes]), so the graph runs node by node and allocates at run time");
    report.passes.push_back(std::move(record));
    report.nodes_before = report.nodes_after = graph->num_nodes();
    report.reached_fixed_point = true;
  }
  std::vector<std::pair<size_t, std::string>> by_name;
  for (const OutputIntoParam& i : into)
    by_name.emplace_back(i.output, i.param->name());
  auto lower = [by_name](std::shared_ptr<const Graph> g, const BufferPlacer& place) {
    std::vector<OutputIntoParam> mapped;
    for (const auto& [output, name] : by_name)
      mapped.push_back({output, g->find_param(name)});
    return std::make_shared<Executable>(g, mapped, place);
  };
  // A symbolic graph has a graph of its own per size, lowered as it comes
  // and placed value for value after the symbolic one's plan: not unrolled.
  if (graph->is_symbolic()) return std::make_shared<PerSizeRunner>(graph, lower);
  lowered = graph_to_lower(graph, unroll, report);
  return lower(lowered, {});
}

std::shared_ptr<const GraphRunner> make_interpreter(const std::shared_ptr<const Graph>& graph) {
  if (!graph->is_symbolic())
    return std::make_shared<Interpreter>(graph, run_control_flow_with_grad);
  return std::make_shared<PerSizeRunner>(
      graph, [](std::shared_ptr<const Graph> g, const BufferPlacer&) {
        return std::make_shared<Interpreter>(g, run_control_flow_with_grad);
      });
}

}  // namespace

void set_runner_factory(RunnerFactory factory) {
  std::lock_guard<std::mutex> lock(g_factory_mutex);
  g_runner_factory = std::move(factory);
}

// One GradPlan per pattern of requires_grad over the inputs and parameters,
// or the error building it gave (thrown again, not rebuilt, on later calls).
struct CompiledFunction::GradCache {
  static constexpr size_t kMaxSymbolicPlans = 64;
  struct Entry {
    std::vector<bool> flags;
    std::vector<int64_t> sizes;  // a symbolic graph's: every input dim
    std::shared_ptr<const GradPlan> plan;
    std::string error;
  };
  std::mutex mutex;
  std::vector<Entry> plans;
};

CompiledFunction::Optimized CompiledFunction::optimized(Capture capture,
                                                        const CompileOptions& options) {
  const std::optional<PassOptions> passes = options.pass_options();
  Optimized result{std::move(capture), {}, passes, {}};
  result.report.record_seconds = result.capture.seconds;
  if (!result.capture.graph) return result;
  result.recorded = result.capture.graph;
  if (passes) {
    result.recorded = result.capture.graph->clone();
    result.report.passes = optimize(*result.capture.graph, *passes);
  }
  return result;
}

CompiledFunction::CompiledFunction(Capture capture, const CompileOptions& options)
    : CompiledFunction(optimized(std::move(capture), options)) {}

CompiledFunction::CompiledFunction(Optimized optimized)
    : CompiledFunction(std::move(optimized.capture.graph), optimized.capture.num_outputs,
                       std::move(optimized.capture.state_updates),
                       std::move(optimized.capture.grad_updates),
                       // The default pipeline, not a list the caller chose.
                       optimized.passes && optimized.passes->passes.empty()) {
  differentiable_ = optimized.capture.differentiable;
  warnings_ = std::move(optimized.capture.warnings);
  CompileReport lowered = std::move(compile_report_);  // what the constructor measured
  compile_report_ = std::move(optimized.report);
  compile_report_.planned_bytes = lowered.planned_bytes;
  compile_report_.unshared_bytes = lowered.unshared_bytes;
  compile_report_.steps = lowered.steps;
  compile_report_.lower_seconds = lowered.lower_seconds;
  compile_report_.lowering = std::move(lowered.lowering);
  recorded_ = std::move(optimized.recorded);
  passes_ = std::move(optimized.passes);
  if (symbolic_ && !optimized.capture.example_sizes.empty())
    prepare(optimized.capture.example_sizes);
}

void CompiledFunction::prepare(const std::map<std::string, int64_t>& sizes) {
  auto runner = std::dynamic_pointer_cast<const PerSizeRunner>(runner_);
  if (!symbolic_ || !runner) return;
  std::vector<IntList> shapes;
  for (const Value* input : graph_->inputs())
    shapes.push_back(evaluate(input->shape(), sizes));
  auto start = std::chrono::steady_clock::now();
  const RunnerStats stats = runner->prepare(shapes);
  compile_report_.lower_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  compile_report_.planned_bytes = stats.planned_bytes;
  compile_report_.unshared_bytes = stats.unshared_bytes;
  compile_report_.steps = stats.steps;
  compile_report_.planned_at.clear();
  for (const std::string& symbol : graph_->symbols())
    compile_report_.planned_at[symbol] = sizes.at(symbol);
  compile_report_.memory = runner->memory_formula();
}

std::optional<MemoryFormula> CompiledFunction::memory_formula() const {
  auto runner = std::dynamic_pointer_cast<const PerSizeRunner>(runner_);
  if (!symbolic_ || !runner) return std::nullopt;
  return runner->memory_formula();
}

std::optional<int64_t> CompiledFunction::max_size_for(
    int64_t bytes, std::string symbol, const std::map<std::string, int64_t>& others) const {
  std::optional<MemoryFormula> formula = memory_formula();
  KILN_CHECK_VALUE(formula.has_value(), "max_size_for: ",
                   symbolic_ ? "no size of the graph was planned yet; call it once first"
                             : "the graph has no symbolic sizes (trace it with dynamic shapes)");
  std::vector<std::string> free;
  for (const std::string& s : formula->peak().symbols()) {
    if (!others.count(s)) free.push_back(s);
  }
  if (symbol.empty()) {
    KILN_CHECK_VALUE(free.size() == 1, "max_size_for: the peak ", formula->peak(), " depends on ",
                     free.size(),
                     " symbols without a value; name the one to "
                     "search and give the others");
    symbol = free[0];
  }
  return jit::max_size_for(*formula, bytes, symbol, others, graph_->guards());
}

CompiledFunction::CompiledFunction(std::shared_ptr<const Graph> graph, size_t num_outputs,
                                   std::vector<StateUpdate> state_updates,
                                   std::vector<GradUpdate> grad_updates,
                                   bool unroll_loops_when_lowering)
    : graph_(std::move(graph)),
      num_outputs_(num_outputs),
      state_updates_(std::move(state_updates)),
      grad_updates_(std::move(grad_updates)),
      grad_cache_(std::make_shared<GradCache>()) {
  KILN_CHECK_VALUE(graph_ != nullptr, "CompiledFunction: no graph");
  recorded_ = graph_;
  size_t grad_outputs =
      size_t(std::count_if(grad_updates_.begin(), grad_updates_.end(),
                           [](const GradUpdate& u) { return u.output != size_t(-1); }));
  KILN_CHECK_VALUE(num_outputs_ + state_updates_.size() + grad_outputs == graph_->outputs().size(),
                   "CompiledFunction: ", num_outputs_, " outputs, ", state_updates_.size(),
                   " state updates and ", grad_outputs, " gradients, but the graph has ",
                   graph_->outputs().size(), " outputs");
  // Parameters are looked up by name once here, not on every call.
  for (const GradUpdate& update : grad_updates_) {
    const Value* param = graph_->find_param(update.param);
    KILN_CHECK_VALUE(param != nullptr &&
                         (update.output == size_t(-1) || update.output < graph_->outputs().size()),
                     "CompiledFunction: a grad update names no parameter or output of the graph");
    grad_targets_.push_back(param);
  }
  for (const StateUpdate& update : state_updates_) {
    const Value* param =
        update.target == ValueKind::Param ? graph_->find_param(update.param) : nullptr;
    bool known = update.target == ValueKind::Param ? param != nullptr
                                                   : update.input < graph_->inputs().size();
    KILN_CHECK_VALUE(known && update.output < graph_->outputs().size(),
                     "CompiledFunction: a state update names no input or parameter of the graph");
    state_targets_.push_back(param);
  }
  std::vector<OutputIntoParam> into;
  for (size_t i = 0; i < state_updates_.size(); ++i)
    if (state_targets_[i]) into.push_back({state_updates_[i].output, state_targets_[i]});
  symbolic_ = graph_->is_symbolic();
  admitted_ = std::make_shared<AdmittedSizes>();
  interpreter_ = make_interpreter(graph_);
  auto start = std::chrono::steady_clock::now();
  runner_ =
      make_runner(graph_, into, unroll_loops_when_lowering, lowered_, compile_report_.lowering);
  compile_report_.lower_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!runner_) runner_ = interpreter_;
  const RunnerStats stats = runner_->stats();
  compile_report_.planned_bytes = stats.planned_bytes;
  compile_report_.unshared_bytes = stats.unshared_bytes;
  compile_report_.steps = stats.steps;
}

const Graph& CompiledFunction::graph() const {
  KILN_CHECK(graph_ != nullptr, "CompiledFunction: empty (nothing was traced)");
  return *graph_;
}

void CompiledFunction::set_runner(std::shared_ptr<const GraphRunner> runner) {
  runner_ = runner ? std::move(runner) : interpreter_;
}

namespace {
bool requires_grad(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

// copy_ without dispatch for the common case (a compiled training step
// writes every weight and buffer back on each call): same dtype and shape,
// both dense. The version bump is what copy_ would do. Nothing to do when
// the plan already wrote the value in place (the Executable bumped it).
void write_state(const Tensor& target, const Tensor& value) {
  if (target.data_ptr() == value.data_ptr() && target.is_alias_of(value)) return;
  bool plain = target.dtype() == value.dtype() && target.shape() == value.shape() &&
               target.is_contiguous() && value.is_contiguous();
  if (!plain) {
    copy_(target, value);
    return;
  }
  std::memcpy(target.data_ptr(), value.data_ptr(), size_t(value.numel()) * value.itemsize());
  target.bump_version();
}
}  // namespace

bool CompiledFunction::needs_grad(std::span<const Tensor> inputs) const {
  if (!differentiable_ || !grad_mode_enabled()) return false;
  if (std::any_of(inputs.begin(), inputs.end(), requires_grad)) return true;
  // Parameters a frozen compile treats as constants get none.
  if (passes_ && passes_->frozen) return false;
  return std::any_of(graph_->params().begin(), graph_->params().end(),
                     [&](const Value* p) { return requires_grad(p->data()); });
}

bool CompiledFunction::replays_through_dispatch(std::span<const Tensor> inputs) const {
  if (dispatch_observer() != nullptr) return true;  // a trace records: it must see the ops
  return needs_grad(inputs) && grad_plan(inputs) == nullptr;
}

std::shared_ptr<const GradPlan> CompiledFunction::grad_plan(std::span<const Tensor> inputs) const {
  std::vector<bool> input_flags, param_flags, key;
  for (const Tensor& t : inputs)
    input_flags.push_back(requires_grad(t));
  for (const Value* p : recorded_->params())
    param_flags.push_back(requires_grad(p->data()) && !(passes_ && passes_->frozen) &&
                          graph_->find_param(p->name()) != nullptr);
  key = input_flags;
  key.insert(key.end(), param_flags.begin(), param_flags.end());
  // A symbolic graph is differentiated at each size it meets (the
  // differentiated halves are static graphs, planned like any other).
  std::vector<int64_t> sizes;
  if (symbolic_) {
    for (const Tensor& t : inputs)
      sizes.insert(sizes.end(), t.shape().begin(), t.shape().end());
  }
  std::lock_guard<std::mutex> lock(grad_cache_->mutex);
  for (const GradCache::Entry& entry : grad_cache_->plans) {
    if (entry.flags != key || entry.sizes != sizes) continue;
    KILN_CHECK(entry.error.empty(), entry.error);
    return entry.plan;
  }
  if (symbolic_ && grad_cache_->plans.size() >= GradCache::kMaxSymbolicPlans)
    grad_cache_->plans.erase(grad_cache_->plans.begin());
  // Not differentiable as a graph: calls replay through the Interpreter, and
  // eager autograd reports the op when a backward reaches it.
  if (!why_not_differentiable(*recorded_, input_flags, param_flags).empty()) {
    grad_cache_->plans.push_back({std::move(key), std::move(sizes), nullptr, ""});
    return nullptr;
  }
  // Any other failure is a bug or a limit of graph autodiff, not a reason to
  // fall back quietly: it is raised, now and on every later call.
  std::shared_ptr<const GradPlan> plan;
  try {
    std::shared_ptr<const Graph> graph = recorded_;
    if (symbolic_) {
      std::vector<IntList> shapes;
      for (const Tensor& t : inputs)
        shapes.push_back(t.shape());
      graph = specialize(*recorded_, bind_symbols(*recorded_, shapes));
    }
    plan = build_grad_plan(*graph, num_outputs_, inputs, input_flags, param_flags, passes_);
  } catch (const Error& e) {
    grad_cache_->plans.push_back(
        {std::move(key), std::move(sizes), nullptr, str("compiled backward: ", e.what())});
    throw;
  }
  grad_cache_->plans.push_back({std::move(key), std::move(sizes), plan, ""});
  return plan;
}

struct CompiledFunction::AdmittedSizes {
  static constexpr size_t kMax = 64;
  std::mutex mutex;
  std::vector<std::vector<int64_t>> keys;  // every input's dims, most recent last
};

std::string CompiledFunction::size_mismatch(std::span<const Tensor> inputs) const {
  if (!symbolic_) return "";
  std::vector<int64_t> key;
  for (const Tensor& t : inputs)
    key.insert(key.end(), t.shape().begin(), t.shape().end());
  {
    std::lock_guard<std::mutex> lock(admitted_->mutex);
    for (size_t i = admitted_->keys.size(); i-- > 0;)
      if (admitted_->keys[i] == key) return "";
  }
  std::vector<IntList> shapes;
  for (const Tensor& t : inputs)
    shapes.push_back(t.shape());
  try {
    bind_symbols(*graph_, shapes);
  } catch (const Error& e) {
    return e.what();
  }
  std::lock_guard<std::mutex> lock(admitted_->mutex);
  if (admitted_->keys.size() == AdmittedSizes::kMax) admitted_->keys.erase(admitted_->keys.begin());
  admitted_->keys.push_back(std::move(key));
  return "";
}

void CompiledFunction::check_inputs(std::span<const Tensor> inputs) const {
  const auto& expected = graph().inputs();
  KILN_CHECK_VALUE(inputs.size() == expected.size(), "compiled function: expected ",
                   expected.size(), " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i].defined(), "compiled function: input ", i, " is undefined");
    const Value* v = expected[i];
    // Symbolic dims are checked when the call binds the symbols.
    bool same = inputs[i].dtype() == v->dtype() &&
                (symbolic_ ? inputs[i].dim() == int64_t(v->shape().size())
                           : matches_shape(inputs[i].shape(), v->shape()));
    KILN_CHECK_VALUE(same, "compiled function: input ", i, " is ", inputs[i].dtype(),
                     inputs[i].shape(), " but the graph was traced for ", v->dtype(), v->shape(),
                     "; trace again for these inputs (hybridize does so per input signature)");
  }
}

// In-place writes the traced code made to its inputs and parameters.
void CompiledFunction::write_back(const std::vector<Tensor>& results,
                                  std::span<const Tensor> inputs) const {
  if (state_updates_.empty() && grad_updates_.empty()) return;
  NoGradGuard no_grad;  // as the eager code's state updates (BatchNorm's counter)
  for (size_t i = 0; i < state_updates_.size(); ++i) {
    const StateUpdate& update = state_updates_[i];
    const Tensor& target = state_targets_[i] ? state_targets_[i]->data() : inputs[update.input];
    write_state(target, results[update.output]);
  }
  for (size_t i = 0; i < grad_updates_.size(); ++i) {
    size_t output = grad_updates_[i].output;
    set_grad(grad_targets_[i]->data(), output == size_t(-1) ? Tensor() : results[output]);
  }
}

std::vector<Tensor> CompiledFunction::run(std::span<const Tensor> inputs) const {
  check_inputs(inputs);
  return run_matched(inputs);
}

std::vector<Tensor> CompiledFunction::run_matched(std::span<const Tensor> inputs) const {
  // The profiler's range of the call: its plan's steps (or replayed ops) nest in it.
  profiler::Range range(profiler::EventKind::Call, "CompiledFunction");
  // replays_through_dispatch(), decided once: needs_grad walks every input
  // and parameter, and grad_plan takes a lock.
  std::vector<Tensor> results;
  bool replay = dispatch_observer() != nullptr;  // a trace records: it must see the ops
  std::shared_ptr<const GradPlan> plan;
  if (!replay && needs_grad(inputs)) {
    plan = grad_plan(inputs);
    replay = plan == nullptr;
  }
  if (plan) {
    results = run_with_grad(plan, inputs, *recorded_);
  } else {
    results = (replay ? *interpreter_ : *runner_).run_unchecked(inputs);
  }
  write_back(results, inputs);
  results.resize(num_outputs_);
  return results;
}

}  // namespace kiln::jit
