#include "kiln/ops/dispatch.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>

#include "kiln/core/overlap.h"
#include "kiln/engine/engine.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/attrs_text.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/op_threads.h"
#include "kiln/util/profile_recorder.h"

namespace kiln {
namespace {

thread_local DispatchObserver* t_observer = nullptr;
// Set by the autograd layer (init_autograd), possibly from several threads
// at once with the same values: atomics, read relaxed on every op.
std::atomic<AutogradHook> g_autograd_hook = nullptr;
std::atomic<InplaceCheck> g_inplace_check = nullptr;

bool kind_matches(AttrKind kind, const AttrValue& v) {
  switch (kind) {
    case AttrKind::Bool:
      return std::holds_alternative<bool>(v);
    case AttrKind::Int:
      return std::holds_alternative<int64_t>(v) || std::holds_alternative<Dim>(v);
    case AttrKind::Float:
      return std::holds_alternative<double>(v);
    case AttrKind::Ints:
      return std::holds_alternative<IntList>(v) || std::holds_alternative<DimList>(v);
    case AttrKind::DType:
      return std::holds_alternative<DType>(v);
    case AttrKind::String:
      return std::holds_alternative<std::string>(v);
  }
  return false;
}

// Lets callers write {"p", 0} for a float attr or {"dims", 1} for an int list.
AttrValue coerce(AttrKind kind, AttrValue v) {
  v = canonical_attr(std::move(v));
  if (kind == AttrKind::Float && std::holds_alternative<int64_t>(v)) {
    return double(std::get<int64_t>(v));
  }
  if (kind == AttrKind::Ints && std::holds_alternative<int64_t>(v)) {
    return IntList{std::get<int64_t>(v)};
  }
  if (kind == AttrKind::Ints && std::holds_alternative<Dim>(v)) return DimList{std::get<Dim>(v)};
  return v;
}

void check_input_count(const OpDef& op, size_t n) {
  bool ok = int(n) >= op.min_inputs && (op.max_inputs < 0 || int(n) <= op.max_inputs);
  if (ok) return;
  std::string expected = op.max_inputs < 0 ? str("at least ", op.min_inputs)
                         : op.min_inputs == op.max_inputs
                             ? str(op.min_inputs)
                             : str(op.min_inputs, " to ", op.max_inputs);
  KILN_CHECK(false, op.name, ": expected ", expected, " inputs, got ", n);
}

std::vector<TensorMeta> metas_of(const OpDef& op, const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> metas;
  metas.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i].defined() || op.input_may_be_absent(i), op.name, ": input ", i,
                     " is required but was not given (an undefined tensor)");
    metas.push_back(meta_of(inputs[i]));
  }
  return metas;
}

const OpDef& cast_op() {
  static const OpDef& cast = kiln::op("cast");
  return cast;
}

// The cast op's attributes for each target dtype, normalized once: every
// op on a tensor and a Python number of another kind (`y + 1` on floats)
// casts that number.
const Attrs& cast_attrs(DType dtype) {
  static const std::array<Attrs, kNumDTypes> attrs = [] {
    std::array<Attrs, kNumDTypes> made;
    for (int d = 0; d < kNumDTypes; ++d)
      made[size_t(d)] = normalize_attrs(cast_op(), {{"dtype", DType(d)}});
    return made;
  }();
  return attrs[size_t(dtype)];
}

// The views of an op's tensors, on the stack for up to 16. Only as many as
// there are tensors are made: default-constructing all 16 slots (a view
// holds 12 dims of shape and strides, 208 bytes) zeroed 3 KB per side,
// which cost the eager `y + 1` of a 1x2 tensor an eighth of its time.
class KernelViews {
 public:
  explicit KernelViews(const std::vector<Tensor>& tensors) {
    if (tensors.size() > kOnStack) {  // very wide ops (cat of many)
      heap_.reserve(tensors.size());
      for (const Tensor& t : tensors)
        heap_.push_back(view_of(t));
      views_ = heap_;
      return;
    }
    auto* slots = reinterpret_cast<cpu::StridedView*>(stack_);
    for (size_t i = 0; i < tensors.size(); ++i)
      std::construct_at(slots + i, view_of(tensors[i]));
    views_ = {std::launder(slots), tensors.size()};
  }
  KernelViews(const KernelViews&) = delete;
  KernelViews& operator=(const KernelViews&) = delete;
  std::span<cpu::StridedView> span() const { return views_; }

 private:
  static constexpr size_t kOnStack = 16;
  static_assert(std::is_trivially_destructible_v<cpu::StridedView>);
  alignas(cpu::StridedView) std::byte stack_[kOnStack * sizeof(cpu::StridedView)];
  std::vector<cpu::StridedView> heap_;
  std::span<cpu::StridedView> views_;
};

void run_kernel(const OpDef& op, const std::vector<Tensor>& inputs,
                const std::vector<Tensor>& outputs, const Attrs& attrs,
                const IssuedStorage* packable = nullptr) {
  KernelViews in_views(inputs), out_views(outputs);
  std::span<cpu::StridedView> in_span = in_views.span(), out_span = out_views.span();
  // As a compiled step of these shapes would run (Note [Threads per step]),
  // or on one thread while the team's cores are busy (Note [A busy team]).
  std::optional<cpu::OneThread> one_thread;
  if (cpu::can_split() && (runs_on_one_thread(op, in_span, out_span) || cpu::team_busy())) {
    one_thread.emplace();
  }
  op.cpu(KernelArgs{in_span, out_span, attrs, packable});
}

// The kernel, then (dispatch_into of a result in another dtype) the cast
// of outputs[0] into `cast_into`.
void run_kernels(const OpDef& op, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs, const Attrs& attrs, const Tensor& cast_into,
                 const IssuedStorage& packable) {
  run_kernel(op, inputs, outputs, attrs, packable.storage ? &packable : nullptr);
  if (!cast_into.defined()) return;
  run_kernel(cast_op(), outputs, {cast_into}, cast_attrs(cast_into.dtype()));
}

// A Python number (a 0-d wrapped number, made on the spot) that no op was
// ever queued on is ready and cannot require grad: its cast runs here with
// the cast kernel, not through a dispatch of its own, which cost as much
// as the whole `y + 1` it served. A trace (an observer) still sees the cast.
bool casts_without_dispatch(const Tensor& t) {
  return t.impl()->wrapped_number && t.dim() == 0 && !t.requires_grad() &&
         t.storage()->engine_var().get() == nullptr && t_observer == nullptr;
}

void cast_inputs(const OpDef& op, std::vector<Tensor>& inputs, const InferResult& inferred) {
  if (inferred.input_dtypes.empty()) return;
  KILN_ASSERT(inferred.input_dtypes.size() == inputs.size(), op.name,
              ": infer gave the wrong number of input dtypes");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DType target = inferred.input_dtypes[i];
    if (!inputs[i].defined() || inputs[i].dtype() == target) continue;
    bool wrapped = inputs[i].impl()->wrapped_number;
    if (casts_without_dispatch(inputs[i])) {
      Tensor cast = make_tensor({}, target);
      run_kernel(cast_op(), {inputs[i]}, {cast}, cast_attrs(target));
      inputs[i] = std::move(cast);
    } else {
      inputs[i] = dispatch1(cast_op(), {inputs[i]}, cast_attrs(target));
    }
    inputs[i].impl()->wrapped_number = wrapped;
  }
}

// The packable input's storage and version as the op is issued: a queued
// op runs after writes issued before it and before writes issued after it,
// so the bytes it reads are those of this version, whatever the counter
// says by the time it runs (Note [Eager packed weights]).
IssuedStorage issued_packable(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (op.packs_input < 0 || size_t(op.packs_input) >= inputs.size()) return {};
  const Tensor& t = inputs[size_t(op.packs_input)];
  if (!t.defined()) return {};
  const StorageImpl& storage = *t.storage();
  return {&storage, storage.version()};
}

// A kernel call as the engine queues it: it holds its tensors (their
// memory lives until it ran) and, when it fails in the background, names
// their shapes next to the kernel's message.
struct KernelCall {
  const OpDef* op;
  Attrs attrs;
  std::vector<Tensor> inputs, outputs;
  Tensor cast_into;  // set: outputs[0] holds the result dtype, converted into this
  IssuedStorage packable;

  void operator()() const { run(*op, attrs, inputs, outputs, cast_into, packable); }

  static void run(const OpDef& op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs, const Tensor& cast_into,
                  const IssuedStorage& packable) {
    try {
      run_kernels(op, inputs, outputs, attrs, cast_into, packable);
    } catch (const Error& e) {
      std::string shapes;
      for (const Tensor& t : inputs)
        shapes += (shapes.empty() ? "" : ", ") + (t.defined() ? str(t.shape()) : "None");
      throw Error(e.kind(), str(e.what(), " (input shapes: ", shapes, ")"));
    }
  }
};

// The engine's cost model for one kernel: the bytes it reads and writes.
// A small kernel costs less than queueing it, and runs at once when
// nothing it touches is pending (Note [Running small ops at once]).
int64_t touched_bytes(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  int64_t bytes = 0;
  for (const auto* tensors : {&inputs, &outputs}) {
    for (const Tensor& t : *tensors) {
      if (t.defined()) bytes += t.numel() * int64_t(t.itemsize());
    }
  }
  return bytes;
}

// What an op reads and writes, as `Handle`s (EngineVarSlot* or EngineVar*)
// that `of` gives for a storage and `generator` for the default generator:
// reads (its inputs), then writes (its outputs, the inputs it mutates, and
// the generator when it draws). Up to 32 on the stack; wider ops (cat) on
// the heap.
template <typename Handle>
struct Touched {
  Handle stack[32];
  std::vector<Handle> heap;
  Handle* base = stack;
  size_t reads = 0, size = 0;

  template <typename Of, typename Generator>
  Touched(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
          const Tensor& cast_into, const std::vector<int>& mutated, Of of, Generator generator) {
    size_t count = inputs.size() + outputs.size() + mutated.size() + 2;
    if (count > 32) {
      heap.resize(count);
      base = heap.data();
    }
    for (const Tensor& t : inputs) {
      if (t.defined()) base[size++] = of(*t.storage());
    }
    reads = size;
    for (const Tensor& t : outputs)
      base[size++] = of(*t.storage());
    if (cast_into.defined()) base[size++] = of(*cast_into.storage());
    for (int i : mutated) {  // an absent optional input (no running statistics) has none
      if (inputs.at(size_t(i)).defined()) base[size++] = of(*inputs[size_t(i)].storage());
    }
    if (op.is_random) base[size++] = generator();
  }
  std::span<Handle const> read_span() const { return {base, reads}; }
  std::span<Handle const> write_span() const { return {base + reads, size - reads}; }
};

// Runs the kernel now, or pushes it: it reads its inputs and writes its
// outputs, the inputs it mutates (batch_norm's running statistics) and,
// when it draws random numbers, the default generator, so draws keep the
// order of sync mode. A small kernel whose memory has nothing pending runs
// at once (Note [Running small ops at once], engine/scheduler.cpp), asked
// through the storages' slots: memory no op was ever queued on gets no
// engine variable. Note [Sync points] in engine/engine.h.
void launch(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            const Attrs& attrs, const Tensor& cast_into = Tensor()) {
  const int64_t inline_bytes = engine::pushing_inline_bytes();
  const IssuedStorage packable = issued_packable(op, inputs);
  if (inline_bytes < 0 || op.runs_where_issued) {
    run_kernels(op, inputs, outputs, attrs, cast_into, packable);
    return;
  }
  std::vector<int> mutated = op.mutated_inputs ? op.mutated_inputs(attrs) : std::vector<int>();
  engine::Site site{op.name.c_str(), nullptr};
  bool small = touched_bytes(inputs, outputs) <= inline_bytes;
  // While the workers wait for cores, every op runs here (Note [Busy cores]).
  bool on_caller = !small && engine::caller_preferred();
  if (small || on_caller) {
    Touched<EngineVarSlot*> slots(
        op, inputs, outputs, cast_into, mutated,
        [](const StorageImpl& s) { return &s.engine_var(); },
        [] {
          engine::var_of(default_generator());  // made here, so it never carries a failure
          return &default_generator().engine_var();
        });
    auto now = [&] { KernelCall::run(op, attrs, inputs, outputs, cast_into, packable); };
    if (engine::run_if_idle(now, slots.read_span(), slots.write_span(), site, on_caller)) return;
  }
  Touched<EngineVar*> vars(
      op, inputs, outputs, cast_into, mutated,
      [](const StorageImpl& s) { return engine::var_of(s); },
      [] { return engine::var_of(default_generator()); });
  int64_t bytes = 0;
  for (const Tensor& t : outputs)
    bytes += int64_t(t.storage()->nbytes());
  engine::push(KernelCall{&op, attrs, inputs, outputs, cast_into, packable}, vars.read_span(),
               vars.write_span(), site, bytes);
}

// An op on a tensor that requires grad, before autograd installed its hook,
// would go unrecorded: refused before the kernel runs (an in-place op would
// already have written its output), naming the op.
void check_autograd_ready(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (!op.differentiable || g_autograd_hook.load(std::memory_order_relaxed) != nullptr) return;
  bool needs_grad = std::any_of(inputs.begin(), inputs.end(),
                                [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  KILN_CHECK(!needs_grad, op.name,
             ": an input requires grad, but autograd is not initialized in this program; call "
             "kiln::init_autograd() (or make the tensor with requires_grad_()) first");
}

// The observer (a recorder) sees the attributes as given, symbols and all;
// autograd gets the ones the kernel ran with, as its rules run on tensors.
void notify(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& recorded,
            const Attrs& attrs, const std::vector<Tensor>& outputs) {
  if (t_observer) t_observer->on_op(op, inputs, recorded, outputs);
  if (!op.differentiable) return;
  bool needs_grad = std::any_of(inputs.begin(), inputs.end(),
                                [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!needs_grad) return;
  // check_autograd_ready() refused the op before it ran when no hook was set.
  if (AutogradHook hook = g_autograd_hook.load(std::memory_order_relaxed)) {
    hook(op, inputs, attrs, outputs);
  }
}

// Concrete inputs give static output shapes, except where an op's output
// size is a symbol its data binds (data_dependent.h).
bool has_static_shapes(const std::vector<TensorMeta>& outputs) {
  return std::all_of(outputs.begin(), outputs.end(),
                     [](const TensorMeta& m) { return is_static(m.shape); });
}

// The profiler's range of one op: its inputs' shapes and its attributes,
// when the session wants them.
void record_shapes(profiler::Range& range, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (!range.wants_shapes()) return;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      range.add_absent_input();
      continue;
    }
    range.add_shape(t.shape().data(), t.shape().size());
  }
  if (!attrs.items().empty()) range.set_attributes(attrs_to_string(attrs));
}

bool can_cast(DType from, DType to) {
  return category(from) <= category(to);
}

}  // namespace

TensorMeta meta_of(const Tensor& t) {
  if (!t.defined()) return TensorMeta{DType::Float32, {}, false, false};
  return TensorMeta{t.dtype(), to_dims(t.shape()), t.impl()->wrapped_number, true};
}

cpu::StridedView view_of(const Tensor& t) {
  cpu::StridedView v;
  if (!t.defined()) return v;
  KILN_CHECK(t.dim() <= cpu::kMaxDims, "tensors of more than ", cpu::kMaxDims,
             " dims are not supported (shape ", t.shape(), ")");
  v.data = t.data_ptr();
  v.dtype = t.dtype();
  v.ndim = int(t.dim());
  std::copy(t.shape().begin(), t.shape().end(), v.shape);
  std::copy(t.strides().begin(), t.strides().end(), v.strides);
  return v;
}

Attrs normalize_attrs(const OpDef& op, const Attrs& given) {
  for (const auto& [name, value] : given.items()) {
    bool known = std::any_of(op.attrs.begin(), op.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    KILN_CHECK_TYPE(known, op.name, ": unexpected attribute '", name, "'");
  }
  std::vector<std::pair<std::string, AttrValue>> out;
  out.reserve(op.attrs.size());
  for (const AttrSpec& spec : op.attrs) {
    auto it = std::find_if(given.items().begin(), given.items().end(),
                           [&](const auto& kv) { return kv.first == spec.name; });
    AttrValue value =
        it != given.items().end() ? coerce(spec.kind, it->second) : spec.default_value;
    bool is_none = std::holds_alternative<std::monostate>(value);
    KILN_CHECK_TYPE(!is_none || spec.optional, op.name, ": missing required attribute '", spec.name,
                    "'");
    KILN_CHECK_TYPE(is_none || kind_matches(spec.kind, value), op.name, ": attribute '", spec.name,
                    "' expects ", to_string(spec.kind), ", got ", attr_to_string(value));
    out.emplace_back(spec.name, std::move(value));
  }
  return Attrs(std::move(out));
}

InferResult infer_meta(const OpDef& op, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  check_input_count(op, inputs.size());
  return op.infer(InferArgs{op, inputs, attrs});
}

// Attributes with symbolic sizes (a trace recording `x.view(batch, -1)`)
// run with the sizes of the call being traced; the observer sees them as given.
Attrs concrete_attrs(const OpDef& op, const Attrs& attrs) {
  if (!attrs.any_symbolic()) return attrs;
  ShapeEnv* env = current_shape_env();
  KILN_CHECK(env != nullptr, op.name,
             ": an attribute holds a symbolic size, which only a trace with dynamic shapes "
             "can run");
  return attrs.evaluated(env->hints());
}

std::vector<Tensor> dispatch(const OpDef& op, std::vector<Tensor> inputs, const Attrs& given) {
  profiler::Range range(profiler::EventKind::Op, op.name);
  check_autograd_ready(op, inputs);
  const Attrs recorded = normalize_attrs(op, given);
  record_shapes(range, inputs, recorded);
  const Attrs attrs = concrete_attrs(op, recorded);
  std::vector<TensorMeta> metas = metas_of(op, inputs);
  InferResult inferred = infer_meta(op, metas, attrs);
  cast_inputs(op, inputs, inferred);

  std::vector<Tensor> outputs;
  outputs.reserve(inferred.outputs.size());
  if (op.kind == OpKind::View) {
    for (ViewMeta& v : op.view(ViewArgs{inputs[0], attrs})) {
      outputs.push_back(make_view(inputs[0], std::move(v.shape), std::move(v.strides), v.offset));
    }
  } else if (has_static_shapes(inferred.outputs)) {
    for (const TensorMeta& m : inferred.outputs)
      outputs.push_back(make_tensor(to_static(m.shape, op.name), m.dtype));
    launch(op, inputs, outputs, attrs);
  } else {  // sizes the data decides: Note [Data-dependent output shapes]
    outputs = run_data_dependent(op, inputs, attrs);
  }
  notify(op, inputs, recorded, attrs, outputs);
  return outputs;
}

Tensor dispatch1(const OpDef& op, std::vector<Tensor> inputs, const Attrs& attrs) {
  std::vector<Tensor> outputs = dispatch(op, std::move(inputs), attrs);
  KILN_ASSERT(outputs.size() == 1, op.name, " returned ", outputs.size(), " outputs, not 1");
  return std::move(outputs[0]);
}

// A kernel writing `out` while reading an input laid out differently over
// the same memory would read values it already overwrote (x.add_(x.t()),
// x[1:].copy_(x[:-1])); PyTorch refuses these, and so does kiln. The same
// view (x.mul_(x)) is fine: elementwise kernels read each element before
// writing it.
void check_write_overlap(std::string_view op_name, const std::vector<Tensor>& inputs,
                         const Tensor& out) {
  KILN_CHECK(!has_internal_overlap(out), op_name,
             ": more than one element of the written-to tensor (shape ", out.shape(), ", strides ",
             out.strides(), ") refers to a single memory location; clone() it first");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    KILN_CHECK(memory_overlap(inputs[i], out) != MemOverlap::Partial, op_name, ": input ", i,
               " (shape ", inputs[i].shape(), ", strides ", inputs[i].strides(),
               ") and the written-to tensor (shape ", out.shape(), ", strides ", out.strides(),
               ") share some memory laid out differently; clone() the input first");
  }
}

void dispatch_into(const OpDef& op, std::vector<Tensor> inputs, const Attrs& given,
                   const Tensor& out) {
  KILN_ASSERT(op.kind != OpKind::View && op.num_outputs == 1, op.name,
              " cannot write into an existing tensor");
  profiler::Range range(profiler::EventKind::Op, op.name);
  check_autograd_ready(op, inputs);
  const Attrs recorded = normalize_attrs(op, given);
  record_shapes(range, inputs, recorded);
  const Attrs attrs = concrete_attrs(op, recorded);
  std::vector<TensorMeta> metas = metas_of(op, inputs);
  InferResult inferred = infer_meta(op, metas, attrs);
  const TensorMeta& result = inferred.outputs.at(0);
  IntList result_shape = to_static(result.shape, op.name);
  bool fits = op.kind == OpKind::Elementwise
                  ? broadcast_shapes(out.shape(), result_shape, op.name) == out.shape()
                  : result_shape == out.shape();
  KILN_CHECK(fits, op.name, ": output with shape ", out.shape(),
             " doesn't match the broadcast shape ", result.shape);
  KILN_CHECK(can_cast(result.dtype, out.dtype()), op.name, ": result type ", result.dtype,
             " can't be cast to the desired output type ", out.dtype());
  check_write_overlap(op.name, inputs, out);
  InplaceCheck check = g_inplace_check.load(std::memory_order_relaxed);
  if (check && out.requires_grad()) check(op, out);
  if (t_observer) t_observer->before_write(op, inputs, out);
  cast_inputs(op, inputs, inferred);
  if (result.dtype == out.dtype()) {
    launch(op, inputs, {out}, attrs);
  } else {
    // Compute in the result dtype, then convert into `out`.
    launch(op, inputs, {make_tensor(out.shape(), result.dtype)}, attrs, out);
  }
  out.bump_version();
  notify(op, inputs, recorded, attrs, {out});
}

DispatchObserver* dispatch_observer() {
  return t_observer;
}
void set_dispatch_observer(DispatchObserver* observer) {
  t_observer = observer;
}
PauseRecording::PauseRecording() : observer_(t_observer), hook_(trace_hook()) {
  t_observer = nullptr;
  set_trace_hook(nullptr);
}
PauseRecording::~PauseRecording() {
  t_observer = observer_;
  set_trace_hook(hook_);
}

void set_autograd_hook(AutogradHook hook) {
  g_autograd_hook.store(hook, std::memory_order_relaxed);
}

void set_inplace_check(InplaceCheck check) {
  g_inplace_check.store(check, std::memory_order_relaxed);
}

}  // namespace kiln
