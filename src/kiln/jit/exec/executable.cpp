#include "kiln/jit/exec/executable.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include "kiln/engine/engine.h"
#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/exec/interpreter.h"
#include "kiln/jit/exec/workspace.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/attrs_text.h"
#include "kiln/util/profile_recorder.h"

namespace kiln::jit {
namespace {

// A step's range in the profile, with its inputs' shapes and its attributes
// (a fused_elementwise's program) when wanted.
void record_step_shapes(profiler::Range& range, const KernelArgs& args) {
  if (!range.wants_shapes()) return;
  for (const cpu::StridedView& v : args.inputs) {
    if (v.data == nullptr) {
      range.add_absent_input();
      continue;
    }
    range.add_shape(v.shape, size_t(v.ndim));
  }
  if (!args.attrs.items().empty()) range.set_attributes(attrs_to_string(args.attrs));
}

std::string input_label(const Value* v, size_t i) {
  return v->name().empty() ? str("input ", i) : str("input ", i, " ('", v->name(), "')");
}

}  // namespace

Executable::Executable(std::shared_ptr<const Graph> graph, std::span<const OutputIntoParam> into,
                       const BufferPlacer& place)
    : graph_(std::move(graph)) {
  KILN_CHECK_VALUE(graph_ != nullptr, "Executable: no graph given");
  if (binds_size_symbols(*graph_)) {  // sizes only the run decides: no plan
    KILN_CHECK(into.empty(), "Executable: a graph whose sizes its data decides (",
               "Note [Data-dependent output shapes]) cannot write its outputs into parameters");
    runs_at_run_time_ = std::make_shared<Interpreter>(graph_);
    return;
  }
  plan_ = lower(*graph_, into, place);
  for_each_graph(*graph_, [&](const Graph& g) {
    for (const Node* node : g.nodes()) {
      runs_where_issued_ |= node->op().runs_where_issued;
      draws_random_ |= node->op().is_random;
    }
  });
  // One workspace up front, so a single-threaded caller allocates nothing
  // but results, from the first call on.
  pool_.push_back(std::make_unique<Workspace>(plan_));
  workspaces_made_ = 1;
}

Executable::~Executable() {
  try {
    runs_var_.wait_for_host_access();  // Note [A compiled run as one engine op]
  } catch (const Error&) {
    // A queued run failed and nobody read its results: nothing to report to.
  }
}

RunnerStats Executable::stats() const {
  if (runs_at_run_time_) return {};
  return RunnerStats{plan_.memory.arena_bytes, plan_.memory.unshared_bytes, plan_.steps.size()};
}

void Executable::check_plan(const char* what) const {
  KILN_CHECK(!runs_at_run_time_, "compiled graph: ", what, " needs a plan, and this graph has ",
             "none: its data decides sizes (Note [Data-dependent output shapes])");
}

size_t Executable::num_workspaces() const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return workspaces_made_;
}

void Executable::check_inputs(std::span<const Tensor> inputs) const {
  const std::vector<Value*>& expected = graph_->inputs();
  KILN_CHECK_VALUE(inputs.size() == expected.size(), "compiled graph: expected ", expected.size(),
                   " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = expected[i];
    const Tensor& t = inputs[i];
    KILN_CHECK_VALUE(t.defined(), "compiled graph: ", input_label(v, i),
                     " is an undefined tensor; expected ", v->dtype(), v->shape());
    KILN_CHECK_TYPE(t.dtype() == v->dtype(), "compiled graph: ", input_label(v, i),
                    " expected dtype ", v->dtype(), " (shape ", v->shape(), "), got ", t.dtype());
    KILN_CHECK_VALUE(matches_shape(t.shape(), v->shape()), "compiled graph: ", input_label(v, i),
                     " expected shape ", v->shape(), ", got ", t.shape(),
                     " (the graph was compiled for fixed shapes)");
  }
}

void Executable::check_outputs(std::span<const Tensor> outputs,
                               std::span<const Tensor> inputs) const {
  const std::vector<Value*>& expected = graph_->outputs();
  KILN_CHECK_VALUE(outputs.size() == expected.size(), "compiled graph: run_into expected ",
                   expected.size(), " output tensors, got ", outputs.size());
  auto overlaps = [](const Tensor& out, std::span<const Tensor> others) {
    return std::any_of(others.begin(), others.end(),
                       [&](const Tensor& t) { return t.defined() && out.is_alias_of(t); });
  };
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Value* v = expected[j];
    const Tensor& out = outputs[j];
    KILN_CHECK_VALUE(out.defined(), "compiled graph: output ", j, " is an undefined tensor");
    KILN_CHECK_TYPE(out.dtype() == v->dtype(), "compiled graph: output ", j, " expected dtype ",
                    v->dtype(), ", got ", out.dtype());
    KILN_CHECK_VALUE(matches_shape(out.shape(), v->shape()), "compiled graph: output ", j,
                     " expected shape ", v->shape(), ", got ", out.shape());
    if (const int32_t held = plan_.output_held[j]; held >= 0) {
      const Tensor& param = plan_.held[size_t(held)];
      KILN_CHECK_VALUE(out.data_ptr() == param.data_ptr() && out.is_contiguous(),
                       "compiled graph: output ", j, " is written into parameter '",
                       graph_->params()[size_t(held)]->name(), "'; pass that parameter's tensor");
      continue;
    }
    KILN_CHECK_VALUE(!overlaps(out, outputs.first(j)), "compiled graph: output ", j,
                     " shares memory with an earlier output");
    KILN_CHECK_VALUE(!overlaps(out, inputs), "compiled graph: output ", j,
                     " shares memory with an input");
    KILN_CHECK_VALUE(!overlaps(out, plan_.held), "compiled graph: output ", j,
                     " shares memory with a parameter or constant of the graph");
  }
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs) const {
  check_inputs(inputs);
  return run_unchecked(inputs);
}

std::vector<Tensor> Executable::run_unchecked(std::span<const Tensor> inputs) const {
  KILN_ASSERT(inputs.size() == graph_->inputs().size(), "compiled graph: ", inputs.size(),
              " inputs for ", graph_->inputs().size(), " (the caller skipped its check)");
  if (runs_at_run_time_) return runs_at_run_time_->run_unchecked(inputs);
  std::vector<Tensor> outputs;
  outputs.reserve(graph_->outputs().size());
  for (size_t j = 0; j < graph_->outputs().size(); ++j) {
    const int32_t held = plan_.output_held[j];
    const Value* v = graph_->outputs()[j];
    outputs.push_back(held >= 0 ? plan_.held[size_t(held)]
                                : make_tensor(to_static(v->shape(), "compiled graph"), v->dtype()));
  }
  execute(inputs, outputs);
  return outputs;
}

void Executable::run_into(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const {
  check_plan("run_into");
  check_inputs(inputs);
  check_outputs(outputs, inputs);
  execute(inputs, outputs);
  // Written in place, as `out=` is: whatever keeps a copy of their contents
  // by version (saved tensors, eager packed weights) sees the write.
  for (const Tensor& t : outputs)
    t.bump_version();
}

std::unique_ptr<Workspace> Executable::take_workspace() const {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      std::unique_ptr<Workspace> ws = std::move(pool_.back());
      pool_.pop_back();
      return ws;
    }
    ++workspaces_made_;
  }
  return std::make_unique<Workspace>(plan_);  // outside the lock: allocates the arena
}

void Executable::give_back(std::unique_ptr<Workspace> ws) const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(ws));
}

// The plan reaches its parameters and constants through pointers it keeps,
// not data_ptr(), so a run waits for the engine's ops on them here (the
// inputs and outputs wait in Workspace::bind): an optimizer step queued in
// async mode lands before the next compiled call reads the weights.
void Executable::wait_for_held() const {
  for (const Tensor& t : plan_.held) {
    if (t.defined()) t.wait_for_engine();
  }
}

// Note [A compiled run as one engine op]
// In async mode a run is queued whole: it reads its inputs, parameters and
// constants and writes its outputs, what it mutates (a training step's
// weights, batch_norm's statistics), the default generator (its random
// steps, when it has any) and the executable's own variable (which orders its runs, and
// whose wait in the destructor keeps a queued run from outliving the plan).
// Version counters move when the run is queued, as an eager in-place op's
// do; the run packs weights under the versions read then, not when it runs
// (a later in-place op has bumped them by then, without having run). A plan
// that calls back into Python (a custom autograd Function) runs where it
// was called, and so does one holding collectives: queued, its all-reduces
// would reach the communication thread after the caller's later eager ones
// (another order than other ranks', or a deadlock when such a call waits
// for this run's outputs while the run waits for its all-reduce behind
// it). Inside the run, independent steps may run side by side (Note
// [Concurrent steps], concurrency.h).
void Executable::execute(std::span<const Tensor> inputs, std::span<const Tensor> outputs) const {
  if (!engine::pushing() || runs_where_issued_) {
    run_plan(inputs, outputs);
    bump_mutated(inputs);
    return;
  }
  std::vector<EngineVar*> reads, writes;
  reads.reserve(inputs.size());
  for (const Tensor& t : inputs)
    reads.push_back(engine::var_of(*t.storage()));
  int64_t bytes = 0;
  for (const Tensor& t : outputs) {
    writes.push_back(engine::var_of(*t.storage()));
    bytes += int64_t(t.storage()->nbytes());
  }
  for (const Tensor& t : plan_.held) {
    if (t.defined()) reads.push_back(engine::var_of(*t.storage()));
  }
  for (const Mutation& m : plan_.mutations) {
    const Tensor& written = m.root == RootKind::Fixed ? plan_.held[m.index] : inputs[m.index];
    writes.push_back(engine::var_of(*written.storage()));  // also read: a write wins
  }
  if (draws_random_) writes.push_back(engine::var_of(default_generator()));
  if (!runs_var_.get()) runs_var_.install(engine::new_order_var());
  writes.push_back(runs_var_.get());
  std::vector<Tensor> in(inputs.begin(), inputs.end()), out(outputs.begin(), outputs.end());
  engine::push([this, in = std::move(in), out = std::move(out),
                versions = held_versions()] { run_plan(in, out, versions); },
               reads, writes, engine::Site{"compiled graph", engine::caller_location()}, bytes);
  bump_mutated(inputs);  // after the versions the run packs under were taken
}

void Executable::bump_mutated(std::span<const Tensor> inputs) const {
  for (const Mutation& m : plan_.mutations) {
    const Tensor& written = m.root == RootKind::Fixed ? plan_.held[m.index] : inputs[m.index];
    written.bump_version();
  }
}

std::vector<uint64_t> Executable::held_versions() const {
  std::vector<uint64_t> versions(plan_.held.size(), 0);
  for (size_t i = 0; i < plan_.held.size(); ++i) {
    if (plan_.held[i].defined()) versions[i] = plan_.held[i].version();
  }
  return versions;
}

void Executable::run_plan(std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                          std::span<const uint64_t> versions) const {
  bool inputs_strided = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const cpu::StridedView& assumed = plan_.slots[size_t(plan_.input_slots[i])].view;
    const IntList& strides = inputs[i].strides();
    inputs_strided |= !std::equal(strides.begin(), strides.end(), assumed.strides);
  }
  struct Lease {
    const Executable* exe;
    std::unique_ptr<Workspace> ws;
    ~Lease() { exe->give_back(std::move(ws)); }
  } lease{this, take_workspace()};
  wait_for_held();
  if (versions.empty()) {
    lease.ws->read_held_versions(plan_.held);
  } else {
    lease.ws->set_held_versions(versions);
  }
  lease.ws->bind(inputs, outputs, inputs_strided);
  run_steps(*lease.ws, inputs_strided, {});
  lease.ws->finish(outputs);
}

namespace {
// A tensor over a view's memory, owning none of it (the strided slow path).
Tensor tensor_over(const cpu::StridedView& v) {
  auto storage = std::make_shared<StorageImpl>(v.data, 0, [] {});
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), IntList(v.shape, v.shape + v.ndim),
                                             IntList(v.strides, v.strides + v.ndim), 0, v.dtype));
}
}  // namespace

uint64_t fresh_input_key() {
  static std::atomic<uint64_t> made{0};
  return (uint64_t(1) << 63) | made.fetch_add(1, std::memory_order_relaxed);
}

void Executable::run_views(std::span<const cpu::StridedView> inputs,
                           std::span<const cpu::StridedView> outputs,
                           std::span<const uint64_t> input_keys) const {
  check_plan("run_views");
  bool inputs_strided = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const cpu::StridedView& assumed = plan_.slots[size_t(plan_.input_slots[i])].view;
    inputs_strided |=
        !std::equal(assumed.strides, assumed.strides + assumed.ndim, inputs[i].strides);
  }
  if (inputs_strided) {
    std::vector<Tensor> in, out;
    for (const cpu::StridedView& v : inputs)
      in.push_back(tensor_over(v));
    for (const cpu::StridedView& v : outputs)
      out.push_back(tensor_over(v));
    execute(in, out);
    return;
  }
  struct Lease {
    const Executable* exe;
    std::unique_ptr<Workspace> ws;
    ~Lease() { exe->give_back(std::move(ws)); }
  } lease{this, take_workspace()};
  wait_for_held();
  lease.ws->read_held_versions(plan_.held);
  lease.ws->bind_views(inputs, outputs);
  run_steps(*lease.ws, false, input_keys);
  for (const Mutation& m : plan_.mutations) {
    if (m.root == RootKind::Fixed) plan_.held[m.index].bump_version();
  }
}

// Note [Concurrent steps] (concurrency.h): a wave the cost model marked
// runs side by side when the running thread has threads to spare; inputs
// with other strides than planned take the plain kernels, in order.
void Executable::run_steps(Workspace& ws, bool inputs_strided,
                           std::span<const uint64_t> input_keys) const {
  const bool profiling = profiler::recording();  // read once per run, not per step
  // Every step on one thread while the team's cores are busy (Note [A busy
  // team], kernels/cpu/parallel.h).
  std::optional<cpu::OneThread> busy_team;
  if (cpu::can_split() && cpu::team_busy()) busy_team.emplace();
  // The caller's team, which steps not marked one_thread run on (Note
  // [Threads per step], ops/op_threads.h); 1 inside a region.
  const int team = cpu::can_split() ? cpu::max_threads() : 1;
  const int threads = plan_.has_concurrent_waves && !inputs_strided ? team : 1;
  if (threads < 2) {
    for (const Step& step : plan_.steps)
      run_step(step, ws, inputs_strided, input_keys, profiling, team);
    return;
  }
  for (const Wave& wave : plan_.waves) {
    const Step* steps = plan_.steps.data() + wave.first;
    if (!wave.concurrent) {
      for (uint32_t k = 0; k < wave.count; ++k)
        run_step(steps[k], ws, false, input_keys, profiling, team);
      continue;
    }
    cpu::run_concurrently(wave.count, std::min(threads, int(wave.count)), [&](int64_t k) {
      run_step(steps[k], ws, false, input_keys, profiling, /*team=*/1);
    });
  }
}

void Executable::run_step(const Step& step, Workspace& ws, bool inputs_strided,
                          std::span<const uint64_t> input_keys, bool profiling, int team) const {
  const cpu::StridedView* first = ws.args() + step.first_arg;
  KernelArgs kernel_args{
      {first, step.num_inputs}, {first + step.num_inputs, step.num_outputs}, *step.attrs};
  std::optional<cpu::OneThread> one_thread;
  if (step.one_thread && team > 1) one_thread.emplace();
  profiler::Range range(profiling, profiler::EventKind::Step, step.op->name);
  if (range.active()) range.set_threads(step.one_thread ? 1 : team);
  record_step_shapes(range, kernel_args);
  if (step.control_flow) {
    // It takes any strides itself.
    run_control_flow(step, kernel_args, ws, input_keys);
    return;
  }
  if (!step.prepared || (inputs_strided && step.touches_inputs)) {
    step.kernel(kernel_args);
    return;
  }
  if (step.packed_held >= 0) {
    step.prepared->run_packed(kernel_args, ws.held_version(size_t(step.packed_held)));
    return;
  }
  const uint64_t key =
      step.packed_input >= 0 && !input_keys.empty() ? input_keys[size_t(step.packed_input)] : 0;
  if (key) {
    step.prepared->run_packed(kernel_args, key);
    return;
  }
  step.prepared->run(kernel_args);
}

// The step's input keys from Plan::key_sources, in the workspace's buffer.
void Executable::run_control_flow(const Step& step, const KernelArgs& args, Workspace& ws,
                                  std::span<const uint64_t> input_keys) const {
  uint64_t* keys = ws.keys() + step.first_key_source;
  for (uint32_t i = 0; i < step.num_inputs; ++i) {
    const KeySource& source = plan_.key_sources[step.first_key_source + i];
    uint64_t key = 0;
    if (source.root == RootKind::Fixed) key = version_key(ws.held_version(source.index));
    if (source.root == RootKind::Input && !input_keys.empty()) key = input_keys[source.index];
    keys[i] = key;
  }
  step.control_flow->run_keyed(args, {keys, step.num_inputs});
}

}  // namespace kiln::jit
